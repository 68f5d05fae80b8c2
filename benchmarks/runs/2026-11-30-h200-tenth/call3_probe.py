"""Tenth session, call 3: does the cold-L2 flush itself cost the timed call? The suite
zeroes a 256 MiB buffer before each sample (as triton's do_bench does); that leaves the
L2 full of dirty lines of the flush buffer, which the timed kernel may have to write back.
Times the same calls with (zero) the suite's flush, (read) a flush that only reads 256 MiB
(clean lines left), (zero+read) both, (none) no flush."""
import sys
import torch
sys.path.insert(0, ".")
import suite.timing as timing
from kernels.layer_norm.cuda import extension as ln_ext
from kernels.softmax.cuda import extension as sm_ext

dev = torch.device("cuda")
torch.manual_seed(0)
real = timing._flush_buffer(0)
other = torch.empty_like(real)
sink = torch.empty((), dtype=torch.int64, device=dev)

class Flush:
    def __init__(self, mode): self.mode = mode
    def zero_(self):
        if "zero" in self.mode: real.zero_()
        if "read" in self.mode: torch.sum(other, dim=0, out=sink)

def med(fn, mode):
    if mode == "none":
        return [timing.time_call(fn, dev, repeats=30, flush_l2=False).median_s for _ in range(3)]
    timing._flush_buffers[0] = Flush(mode)
    try:
        return [timing.time_call(fn, dev, repeats=30).median_s for _ in range(3)]
    finally:
        timing._flush_buffers[0] = real

def ln(rows, n, dt):
    x = torch.randn(rows, n, device=dev, dtype=dt); dy = torch.randn_like(x)
    g = torch.randn(n, device=dev, dtype=dt); xf = x.float()
    mean = xf.mean(1); rstd = torch.rsqrt(xf.var(1, unbiased=False) + 1e-5)
    dx = torch.empty_like(x); dg = torch.empty_like(g); db = torch.empty_like(g)
    e = ln_ext()
    return lambda: e.bwd(x, dy, g, mean, rstd, dx, dg, db)

def sm(rows, n, dt):
    y = torch.softmax(torch.randn(rows, n, device=dev), -1).to(dt); dy = torch.randn_like(y)
    dx = torch.empty_like(y); e = sm_ext()
    return lambda: e.bwd(y, dy, None, 1.0, dx)

def copy(nbytes):
    src = torch.randint(0, 255, (nbytes // 2,), dtype=torch.uint8, device=dev); dst = torch.empty_like(src)
    return lambda: dst.copy_(src)

one = torch.empty(1, device=dev)
calls = [("one-element zero_", lambda: one.zero_()),
         ("copy 201 MB", copy(4096 * 8192 * 6)),
         ("copy 2 GiB", copy(2 * 2**30)),
         ("LN 4096x8192 bf16", ln(4096, 8192, torch.bfloat16)),
         ("LN 16384x4096 bf16", ln(16384, 4096, torch.bfloat16)),
         ("softmax 4096x8192 bf16", sm(4096, 8192, torch.bfloat16)),
         ("softmax 4096x8192 fp32", sm(4096, 8192, torch.float32))]
for label, fn in calls:
    for mode in ("zero", "read", "zero+read", "none"):
        m = med(fn, mode)
        print(f"{label:24s} flush={mode:9s} medians us {' '.join(f'{v*1e6:8.2f}' for v in m)}", flush=True)
