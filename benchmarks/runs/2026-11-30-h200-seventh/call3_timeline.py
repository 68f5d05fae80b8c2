"""Per-kernel timeline of one call, as the suite times it (L2 flush, spin, events): where the
time between the events goes. Device only; scratch for the seventh session."""
import json, statistics, sys, tempfile
import torch
from torch.profiler import profile, ProfilerActivity

dev = "cuda"
buf = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device=dev)

def ln_case(M, N, dt):
    from kernels.layer_norm import cuda as ln
    ext = ln.extension()
    x = torch.randn(M, N, device=dev, dtype=dt); dy = torch.randn_like(x)
    g = torch.randn(N, device=dev, dtype=torch.float32)
    mean = x.float().mean(1); rstd = torch.rsqrt(x.float().var(1, unbiased=False) + 1e-5)
    dx = torch.empty_like(x); dg = torch.empty_like(g); db = torch.empty_like(g)
    return lambda: ext.bwd(x, dy, g, mean, rstd, dx, dg, db), 3 * M * N * x.element_size()

def sm_case(M, N, dt):
    from kernels.softmax import cuda as sm
    ext = sm.extension()
    y = torch.softmax(torch.randn(M, N, device=dev, dtype=torch.float32), -1).to(dt)
    dy = torch.randn_like(y); dx = torch.empty_like(y)
    return lambda: ext.bwd(y, dy, None, 1.0, dx), 3 * M * N * y.element_size()

def run(name, fn, nbytes, iters=10):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    evs = []
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            buf.zero_(); torch.cuda._sleep(200000)
            a = torch.cuda.Event(enable_timing=True); b = torch.cuda.Event(enable_timing=True)
            a.record(); fn(); b.record(); evs.append((a, b))
        torch.cuda.synchronize()
    ev_us = statistics.median(a.elapsed_time(b) * 1e3 for a, b in evs)
    path = tempfile.mktemp(suffix=".json"); prof.export_chrome_trace(path)
    ks = [e for e in json.load(open(path))["traceEvents"] if e.get("cat") == "kernel"]
    ks.sort(key=lambda e: e["ts"])
    ours = [e for e in ks if "zero" not in e["name"].lower() and "sleep" not in e["name"].lower()
            and "fill" not in e["name"].lower() and "elementwise" not in e["name"]]
    names = sorted(set(e["name"].split("(")[0].split("<")[0].split("::")[-1] for e in ours))
    per = len(ours) // iters
    spans, durs, gaps = [], {}, []
    for i in range(iters):
        grp = ours[i * per:(i + 1) * per]
        spans.append(grp[-1]["ts"] + grp[-1]["dur"] - grp[0]["ts"])
        for j, e in enumerate(grp):
            durs.setdefault(j, []).append(e["dur"])
            if j: gaps.append(e["ts"] - (grp[j - 1]["ts"] + grp[j - 1]["dur"]))
    med = statistics.median
    print(f"{name}: events {ev_us:.1f} us ({nbytes / ev_us / 1e3:.0f} GB/s); kernels span {med(spans):.1f} us; "
          + "; ".join(f"k{j} {med(d):.1f} us" for j, d in durs.items())
          + (f"; gap {med(gaps):.1f} us" if gaps else "") + f"; kernels {names}", flush=True)

for name, mk in [("ln bf16 4096x8192", lambda: ln_case(4096, 8192, torch.bfloat16)),
                 ("ln bf16 16384x4096", lambda: ln_case(16384, 4096, torch.bfloat16)),
                 ("ln fp32 4096x8192", lambda: ln_case(4096, 8192, torch.float32)),
                 ("softmax bf16 4096x8192", lambda: sm_case(4096, 8192, torch.bfloat16)),
                 ("softmax fp32 4096x8192", lambda: sm_case(4096, 8192, torch.float32))]:
    try:
        fn, nb = mk(); run(name, fn, nb)
    except Exception as e:
        print(name, "failed:", repr(e)[:300], flush=True)
