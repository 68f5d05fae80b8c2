"""eleventh session, call 3 probe: the hold (suite/timing.py as committed) against the
per-sample spacer it replaced (call3_old_timing.py: suite/timing.py at the first commit of
the session, 25 ms warm-up already), same run. Softmax 8192x1024 (bf16, fp32) and 4096x8192
bf16, ours (cuda) and Liger in both orders, 4 repetitions, a 50 ms host pause before each
timing. Per timing: the median and the samples."""
import importlib.util, json, sys, time
import torch
from suite import registry, timing
from suite.cases import load_cases
from suite.runner import CaseContext, RunOptions, _timed_call

spec_ = importlib.util.spec_from_file_location("old_timing", "call3_old_timing.py")
old = importlib.util.module_from_spec(spec_); sys.modules["old_timing"] = old; spec_.loader.exec_module(old)
dev = torch.device("cuda")
spec = registry.op("softmax")
impls = {i.name: i for i in registry.implementations("softmax")}
cases = [c for c in load_cases(op="softmax", profile="perf")
         if c.id.split("/")[1] in ("targets-8192x1024", "targets-4096x8192")
         and not c.id.endswith("4096x8192/R4096-N8192-fp32")]
opts = RunOptions(device=dev, golden_device=dev)
out = []
for case in cases:
    ctx = CaseContext(spec, case, opts)
    fns = {n: _timed_call(spec, impls[n], ctx) for n in ("cuda", "liger")}
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    for rep in range(4):
        for name, mod in (("spacer", old), ("hold", timing)):
            for order in (("cuda", "liger"), ("liger", "cuda")):
                for n in order:
                    time.sleep(0.05)
                    t = mod.time_call(fns[n], dev, warmup=3, warmup_s=0.025, repeats=20)
                    row = dict(case=case.id, rep=rep, pacing=name, first=order[0], impl=n,
                               median_us=t.median_s * 1e6,
                               samples_us=[round(s * 1e6, 2) for s in t.samples_s])
                    out.append(row)
                    print(f"{case.id[-16:]} {rep} {name:6} first={order[0]:5} {n:5} "
                          f"{t.median_s*1e6:7.2f} | " + " ".join(f"{s:.1f}" for s in row["samples_us"]),
                          flush=True)
    del ctx, fns
json.dump(out, open(sys.argv[1], "w"))
