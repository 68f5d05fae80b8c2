"""Linear backward port that, with the activation on the input and its output saved, takes
the derivative at the saved tensor: act'(a) with a = act(x), instead of act'(x) (the saved
tensor after the GEMM is the pre-activation Z, and the port treats the input side alike)."""

import torch

from tests.data.ports.linear.reference_port import _act, _dact


def backward(*, x, w, dy, bias, z, a, activation, approximate, act_at, out):
    xf, wf, dyf = x.float(), w.float(), dy.float()
    if act_at == "output":
        dz = dyf
        if activation != "none":
            pre = z.float() if z is not None else xf @ wf.t() + (
                bias.float() if bias is not None else 0)
            dz = dyf * _dact(pre, activation, approximate)
        dx, dw, db = dz @ wf, dz.t() @ xf, dz.sum(0)
    else:
        g = dyf @ wf
        if activation == "none":
            dx, acted = g, xf
        else:
            acted = a.float() if a is not None else _act(xf, activation, approximate)
            saved = a.float() if a is not None else xf
            dx = g * _dact(saved, activation, approximate)
        dw, db = dyf.t() @ acted, dyf.sum(0)
    out["dx"].copy_(dx)
    out["dw"].copy_(dw)
    if "db" in out:
        out["db"].copy_(db)
