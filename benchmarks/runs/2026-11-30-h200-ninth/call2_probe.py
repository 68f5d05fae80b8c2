"""Ninth session, call 2: what the suite's timing gives a plain device copy of the same bytes
as the perf cases (L2 flushed as for every case), against the calibrated copy bandwidth,
and the floor of the method (a one-element kernel)."""
import json, sys
import torch
sys.path.insert(0, ".")
from suite import roofline
from suite.timing import time_call

dev = torch.device("cuda")
bw = roofline.load_ceilings(dev).copy_gbps if hasattr(roofline, "load_ceilings") else None
print("calibrated copy GB/s", bw)
one = torch.empty(1, device=dev)
t = time_call(lambda: one.zero_(), dev, repeats=50)
print(f"one-element kernel: median {t.median_s*1e6:.2f} us")
rows = []
for label, total in [("8192x1024 bf16 softmax", 8192 * 1024 * 2 * 3),
                     ("4096x8192 bf16 softmax/LN", 4096 * 8192 * 2 * 3),
                     ("16384x4096 bf16 / 4096x8192 fp32", 4096 * 8192 * 4 * 3),
                     ("16384x4096 fp32", 16384 * 4096 * 4 * 3), ("2 GiB", 2 * 2**30)]:
    half = total // 2
    src = torch.randint(0, 255, (half,), dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    for flush in (True, False):
        tm = time_call(lambda: dst.copy_(src), dev, repeats=20, flush_l2=flush)
        gbps = 2 * half / tm.median_s / 1e9
        print(f"copy {label:34s} {2*half/1e6:8.1f} MB flush={flush!s:5s} {tm.median_s*1e6:8.2f} us "
              f"{gbps:7.0f} GB/s frac {gbps / bw if bw else float('nan'):.3f}")
    del src, dst
