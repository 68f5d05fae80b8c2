"""Linear backward port that computes the weight gradient in the textbook (in x out) layout,
dWᵀ = xᵀ dZ of shape (K, N), and reshapes it to PyTorch's (N, K) weight instead of
transposing it: the K x N numbers land in dw's row-major order."""

import torch

from tests.data.ports.linear.reference_port import _act, _dact


def backward(*, x, w, dy, bias, z, a, activation, approximate, act_at, out):
    xf, wf, dyf = x.float(), w.float(), dy.float()
    N, K = w.shape
    if act_at == "output":
        dz = dyf
        if activation != "none":
            pre = z.float() if z is not None else xf @ wf.t() + (
                bias.float() if bias is not None else 0)
            dz = dyf * _dact(pre, activation, approximate)
        dx, dw_in_out, db = dz @ wf, xf.t() @ dz, dz.sum(0)
    else:
        g = dyf @ wf
        if activation == "none":
            dx, acted = g, xf
        else:
            dx = g * _dact(xf, activation, approximate)
            acted = a.float() if a is not None else _act(xf, activation, approximate)
        dw_in_out, db = acted.t() @ dyf, dyf.sum(0)
    out["dx"].copy_(dx)
    out["dw"].copy_(dw_in_out.reshape(N, K))
    if "db" in out:
        out["db"].copy_(db)
