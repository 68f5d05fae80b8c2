"""Softmax backward variants timed side by side on the H200 (2026-11-30, tree of commit
56ec1e658e83; output in softmax_variants.log). Kept as run; not part of the suite.

The variants were built from a scratch copy of commit 73fd05b's
kernels/softmax/csrc/softmax_bwd.cu (+ .h and binding) in kernels/softmax/csrc_exp/,
removed after the run, with these macros:
  old   -- unchanged (one block a row, registers; the kernel the suite ships)
  c1    -- SMX_C1: rows of <= 1024 vectors one vector a thread (TPR = vectors) instead of two
  cs    -- SMX_CS: __ldcs loads and __stcs stores (streaming) instead of __ldg and plain stores
  c1cs  -- both
  piped -- the shared-memory ring kernel of commit 56ec1e658e83 (kernels/softmax/cuda.py then)
  liger -- Liger-Kernel 0.8.5's Triton kernel
Timing: CUDA events around one call, 256 MiB L2 flush before each, median of 25; fraction
of a 1 GiB device copy (bytes read + written) timed the same way.
"""
import statistics, sys, torch
from pathlib import Path
from torch.utils.cpp_extension import load
from kernels.softmax import cuda as cur
from kernels.softmax import liger

D = Path("kernels/softmax/csrc_exp")
ARCH = ["-O3", "--use_fast_math", "-std=c++17", "-gencode=arch=compute_90,code=sm_90"]
variants = {"old": [], "c1": ["-DSMX_C1"], "cs": ["-DSMX_CS"], "c1cs": ["-DSMX_C1", "-DSMX_CS"]}
exts = {k: load(name=f"smx_{k}", sources=[str(D / "softmax_bwd_binding.cpp"), str(D / "softmax_bwd.cu")],
                extra_include_paths=[str(D)], extra_cuda_cflags=ARCH + f, extra_cflags=["-O3"] + f)
        for k, f in variants.items()}
flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")

def timeit(fn, n=25):
    for _ in range(3): fn()
    ts = []
    for _ in range(n):
        flush.zero_()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); b.synchronize()
        ts.append(a.elapsed_time(b) / 1e3)
    return statistics.median(ts)

src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda"); dst = torch.empty_like(src)
copy = 2 * src.numel() / timeit(lambda: dst.copy_(src), 10) / 1e9
print(f"copy {copy:.0f} GB/s")
impls = {k: (lambda e: (lambda y, dy, dx: e.bwd(y, dy, None, 1.0, dx)))(e) for k, e in exts.items()}
impls["piped"] = lambda y, dy, dx: cur.extension().bwd(y, dy, None, 1.0, dx)
impls["liger"] = lambda y, dy, dx: liger._launch(dy, y, dx)
print("shape dtype " + " ".join(f"{k:>7}" for k in impls))
for rows, n in [(16384, 4096), (4096, 8192), (8192, 1024), (65536, 1024)]:
    for dt in (torch.bfloat16, torch.float32):
        y = torch.softmax(torch.randn(rows, n, device="cuda"), -1).to(dt)
        dy = torch.randn(rows, n, device="cuda").to(dt)
        ref = None; row = []
        for k, f in impls.items():
            dx = torch.empty_like(y)
            t = timeit(lambda: f(y, dy, dx))
            if ref is None: ref = dx.float()
            err = (dx.float() - ref).abs().max().item()
            row.append(f"{3 * y.numel() * y.element_size() / t / 1e9 / copy:7.3f}" + ("!" if err > 1e-2 else ""))
        print(f"{rows}x{n} {str(dt)[6:]} " + " ".join(row), flush=True)
