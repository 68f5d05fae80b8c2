"""eleventh session, call 2 probe: how the samples are paced. For softmax at 8192x1024
(bf16, fp32) and 4096x8192 bf16, ours (cuda) and Liger in both orders, timed by
suite.timing with (a) the per-sample spacer of 2x the host time (shipped), (b) a spacer of
8x, (c) one spin holding the GPU while the host enqueues every sample; 25 ms warm-up; each
timing after a 50 ms host pause (as a case's setup leaves the GPU idle). Per timing: the
median, the samples, the host time per sample, whether the GPU waited for the host."""
import json, sys, time
import torch
from suite import registry, timing
from suite.cases import load_cases
from suite.runner import CaseContext, RunOptions, _timed_call

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
    for rep in range(3):
        for pacing, mult in (("spacer", 2), ("spacer", 8), ("hold", 2)):
            for order in (("cuda", "liger"), ("liger", "cuda")):
                timing._PACING, timing._SPACER_MULTIPLE, timing._HOLD_MULTIPLE = pacing, mult, mult
                for n in order:
                    time.sleep(0.05)
                    t = timing.time_call(fns[n], dev, warmup=3, warmup_s=0.025, repeats=20)
                    row = dict(case=case.id, rep=rep, pacing=f"{pacing}{mult}", order=order[0],
                               impl=n, median_us=t.median_s * 1e6,
                               samples_us=[round(s * 1e6, 2) for s in t.samples_s],
                               warmup=t.warmup, **timing.LAST_PROBE)
                    out.append(row)
                    print(f"{case.id[-16:]} {rep} {pacing}{mult} first={order[0]:5} {n:5} "
                          f"{t.median_s*1e6:7.2f} host {row['host_s']*1e6:6.1f}us waited "
                          f"{row['gpu_waited']} drain {row['drain_s']*1e6:7.0f}us | "
                          + " ".join(f"{s:.1f}" for s in row["samples_us"]), flush=True)
    del ctx, fns
json.dump(out, open(sys.argv[1], "w"))
