"""One LayerNorm backward (dx, dgamma, dbeta) of our cuda kernel on one shape, for
compute-sanitizer racecheck: python3 s7_race.py ROWS N DTYPE."""
import sys
import torch
from kernels.layer_norm import cuda as ln
rows, n, dt = int(sys.argv[1]), int(sys.argv[2]), getattr(torch, sys.argv[3])
x = torch.randn(rows, n, device="cuda", dtype=dt); dy = torch.randn_like(x)
g = torch.randn(n, device="cuda"); mean = x.float().mean(1)
rstd = torch.rsqrt(x.float().var(1, unbiased=False) + 1e-5)
dx = torch.empty_like(x); dg = torch.empty_like(g); db = torch.empty_like(g)
ln.extension().bwd(x, dy, g, mean, rstd, dx, dg, db)
torch.cuda.synchronize()
print("done", rows, n, dt, float(dg.abs().sum()))
