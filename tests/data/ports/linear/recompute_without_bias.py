"""Linear backward port that, when the pre-activation was not saved, recomputes it as
Z = x wᵀ and forgets the bias (the bias is 'only for db'): act'(Z) is taken at Z - b."""

import torch

from tests.data.ports.linear.reference_port import _act, _dact


def backward(*, x, w, dy, bias, z, a, activation, approximate, act_at, out):
    xf, wf, dyf = x.float(), w.float(), dy.float()
    if act_at == "output":
        dz = dyf
        if activation != "none":
            pre = z.float() if z is not None else xf @ wf.t()
            dz = dyf * _dact(pre, activation, approximate)
        dx, dw, db = dz @ wf, dz.t() @ xf, dz.sum(0)
    else:
        g = dyf @ wf
        if activation == "none":
            dx, acted = g, xf
        else:
            dx = g * _dact(xf, activation, approximate)
            acted = a.float() if a is not None else _act(xf, activation, approximate)
        dw, db = dyf.t() @ acted, dyf.sum(0)
    out["dx"].copy_(dx)
    out["dw"].copy_(dw)
    if "db" in out:
        out["db"].copy_(db)
