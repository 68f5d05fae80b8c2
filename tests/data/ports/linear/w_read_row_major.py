"""Linear backward port that reads the weight from its storage as row-major (N, K) with
leading dimension K, as a kernel taking w's data pointer does, ignoring its strides: a
transposed (column-major) w is read as another matrix."""

import torch

from tests.data.ports.linear.reference_port import _act, _dact


def backward(*, x, w, dy, bias, z, a, activation, approximate, act_at, out):
    N, K = w.shape
    wf = w.as_strided((N, K), (K, 1)).float()
    xf, dyf = x.float(), dy.float()
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
            dx = g * _dact(xf, activation, approximate)
            acted = a.float() if a is not None else _act(xf, activation, approximate)
        dw, db = dyf.t() @ acted, dyf.sum(0)
    out["dx"].copy_(dx)
    out["dw"].copy_(dw)
    if "db" in out:
        out["db"].copy_(db)
