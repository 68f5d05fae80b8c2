"""Tenth session, call 1: what the LayerNorm ring kernel's row imbalance costs at 4096x8192
(4096 rows on a 132-block grid: 4 blocks take 32 rows, 128 take 31). Times our kernel at
row counts around whole multiples of the grid, and the two kernels' durations by the
profiler."""
import sys
import torch
sys.path.insert(0, ".")
from suite.timing import time_call
from kernels.layer_norm.cuda import extension

dev = torch.device("cuda")
ext = extension()
torch.manual_seed(0)
sms = torch.cuda.get_device_properties(0).multi_processor_count
print("SMs", sms)

def case(rows, n, dt):
    x = torch.randn(rows, n, device=dev, dtype=dt)
    dy = torch.randn(rows, n, device=dev, dtype=dt)
    g = torch.randn(n, device=dev, dtype=dt)
    xf = x.float()
    mean = xf.mean(1)
    rstd = torch.rsqrt(xf.var(1, unbiased=False) + 1e-5)
    dx = torch.empty_like(x); dg = torch.empty_like(g); db = torch.empty_like(g)
    return lambda: ext.bwd(x, dy, g, mean, rstd, dx, dg, db)

for dt, n, rows_list in [(torch.bfloat16, 8192, [30 * sms, 31 * sms, 31 * sms + 1, 4096, 32 * sms, 32 * sms + 1]),
                         (torch.float32, 8192, [31 * sms, 4096, 32 * sms]),
                         (torch.bfloat16, 4096, [124 * sms, 16384, 125 * sms])]:
    for rows in rows_list:
        fn = case(rows, n, dt)
        meds = [time_call(fn, dev, repeats=30).median_s for _ in range(3)]
        nbytes = rows * n * 3 * (2 if dt != torch.float32 else 4)
        print(f"{str(dt):15s} n={n} rows={rows:6d} rows/block={rows / sms:7.3f} "
              f"medians us {' '.join(f'{m*1e6:7.2f}' for m in meds)}  per row ns {min(meds)/rows*1e9:6.2f}")

from torch.profiler import profile, ProfilerActivity
fn = case(4096, 8192, torch.bfloat16)
buf = torch.empty(256 * 2**20 // 4, device=dev, dtype=torch.int32)
for _ in range(3):
    fn()
torch.cuda.synchronize()
with profile(activities=[ProfilerActivity.CUDA]) as prof:
    for _ in range(10):
        buf.zero_(); torch.cuda._sleep(200000); fn()
    torch.cuda.synchronize()
print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=8))
