"""Launch our LayerNorm or softmax backward kernel a few times on random rows, for a
profiler to pick one launch (device only):

    ncu --clock-control none -k regex:piped --launch-skip 2 --launch-count 1 \
        python3 scripts/ncu_rows.py layer_norm 16384 4096 bf16
"""

import sys

import torch

from kernels.layer_norm import cuda as ln_cuda
from kernels.softmax import cuda as sm_cuda

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def main(op: str, rows: int, n: int, dtype: str, dropout: bool = False, launches: int = 4):
    dt, dev = DTYPES[dtype], "cuda"
    a = torch.randn(rows, n, device=dev).to(dt)
    dy = torch.randn(rows, n, device=dev).to(dt)
    out = torch.empty_like(a)
    if op == "layer_norm":
        gamma = torch.randn(n, device=dev)
        mean, rstd = torch.zeros(rows, device=dev), torch.ones(rows, device=dev)
        dg, db = torch.empty_like(gamma), torch.empty_like(gamma)
        ext = ln_cuda.extension()
        for _ in range(launches):
            ext.bwd(a, dy, gamma, mean, rstd, out, dg, db)
    else:
        y = torch.softmax(a.float(), -1).to(dt)
        mask = torch.rand(rows, n, device=dev) > 0.1 if dropout else None
        ext = sm_cuda.extension()
        for _ in range(launches):
            ext.bwd(y, dy, mask, 1 / 0.9 if dropout else 1.0, out)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4],
         len(sys.argv) > 5 and sys.argv[5] == "dropout")
