"""Linear backward port that takes the bias gradient as the column sum of the incoming dY
in both positions, as for a bare linear layer: with the activation after the GEMM the bias
sits inside it and db must sum dZ = dY act'(Z)."""

import torch

from tests.data.ports.linear.reference_port import _act, _dact


def backward(*, x, w, dy, bias, z, a, activation, approximate, act_at, out):
    xf, wf, dyf = x.float(), w.float(), dy.float()
    db = dyf.sum(0)
    if act_at == "output":
        dz = dyf
        if activation != "none":
            pre = z.float() if z is not None else xf @ wf.t() + (
                bias.float() if bias is not None else 0)
            dz = dyf * _dact(pre, activation, approximate)
        dx, dw = dz @ wf, dz.t() @ xf
    else:
        g = dyf @ wf
        if activation == "none":
            dx, acted = g, xf
        else:
            dx = g * _dact(xf, activation, approximate)
            acted = a.float() if a is not None else _act(xf, activation, approximate)
        dw = dyf.t() @ acted
    out["dx"].copy_(dx)
    out["dw"].copy_(dw)
    if "db" in out:
        out["db"].copy_(db)
