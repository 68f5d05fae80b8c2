"""Linear backward port whose GELU derivative is always the exact (erf) form: the
`approximate` attribute is accepted and ignored, as on PyTorch's CPU path, so a case asking
for the tanh GELU gets Φ(z) + z φ(z)."""

import math

import torch

from tests.data.ports.linear.reference_port import _act


def _dact(z, activation):
    if activation == "relu":
        return (z > 0).float()
    if activation == "silu":
        s = torch.sigmoid(z)
        return s * (1 + z * (1 - s))
    if activation == "gelu":
        return 0.5 * (1 + torch.erf(z / math.sqrt(2))) + z * torch.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
    return torch.ones_like(z)


def backward(*, x, w, dy, bias, z, a, activation, approximate, act_at, out):
    xf, wf, dyf = x.float(), w.float(), dy.float()
    if act_at == "output":
        dz = dyf
        if activation != "none":
            pre = z.float() if z is not None else xf @ wf.t() + (
                bias.float() if bias is not None else 0)
            dz = dyf * _dact(pre, activation)
        dx, dw, db = dz @ wf, dz.t() @ xf, dz.sum(0)
    else:
        g = dyf @ wf
        if activation == "none":
            dx, acted = g, xf
        else:
            dx = g * _dact(xf, activation)
            acted = a.float() if a is not None else _act(xf, activation, approximate)
        dw, db = dyf.t() @ acted, dyf.sum(0)
    out["dx"].copy_(dx)
    out["dw"].copy_(dw)
    if "db" in out:
        out["db"].copy_(db)
