"""Cross entropy's CUDA kernel on one tiny row, printed to the last bit beside the float64
golden: for reading a fuzz finding (all-equal logits, heavy label smoothing) off the GPU.

    python3 scripts/ce_probe.py
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from bwd_suite.golden import cross_entropy as golden  # noqa: E402
from bwd_suite.kernels.cross_entropy.cuda import extension  # noqa: E402


def probe(V, eps, target, coef, dtype=torch.float32, logits=None):
    x = (torch.zeros(1, V) if logits is None else logits).to(dtype).cuda()
    y = torch.tensor([target]).cuda()
    g = torch.tensor(coef, dtype=torch.float32).cuda()
    loss = torch.empty((), dtype=torch.float32, device="cuda")
    dx = torch.full_like(x, float("nan"))
    extension().fwd_bwd(x, y, g, loss, dx, -100, eps, "mean", 0.0, 0.0, False, 1)
    want = golden.cross_entropy(x.double().cpu(), y.cpu(), g.double().cpu(),
                                label_smoothing=eps, seq_len=1)["dlogits"]
    print(f"V={V} eps={eps} y={target} coef={coef}: kernel {dx.cpu().double().tolist()}")
    print(f"   golden {want.tolist()} diff {(dx.cpu().double() - want).tolist()}")


if __name__ == "__main__":
    for V in (3, 4, 8):
        for eps in (0.992, 0.6, 0.3, 0.0):
            probe(V, eps, V - 1, 1.2908)
    probe(3, 0.992, 0, 1.2908)
