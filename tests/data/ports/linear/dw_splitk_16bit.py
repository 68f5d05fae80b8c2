"""Linear backward port that splits dw's sum over the M rows into chunks of 32 (split-K of
the wgrad GEMM) and adds each chunk's fp32 partial into an accumulator of the input dtype,
as an atomic add into the 16-bit output does."""

import torch

from tests.data.ports.linear.reference_port import _act, _dact

CHUNK = 32


def _wgrad(left, right, dtype):
    """leftᵀ right summed over rows, chunk by chunk into a `dtype` accumulator."""
    acc = torch.zeros(left.shape[1], right.shape[1], dtype=dtype)
    for r in range(0, left.shape[0], CHUNK):
        acc = (acc.float() + left[r:r + CHUNK].t() @ right[r:r + CHUNK]).to(dtype)
    return acc.float()


def backward(*, x, w, dy, bias, z, a, activation, approximate, act_at, out):
    xf, wf, dyf = x.float(), w.float(), dy.float()
    if act_at == "output":
        dz = dyf
        if activation != "none":
            pre = z.float() if z is not None else xf @ wf.t() + (
                bias.float() if bias is not None else 0)
            dz = dyf * _dact(pre, activation, approximate)
        dx, dw, db = dz @ wf, _wgrad(dz, xf, x.dtype), dz.sum(0)
    else:
        g = dyf @ wf
        if activation == "none":
            dx, acted = g, xf
        else:
            dx = g * _dact(xf, activation, approximate)
            acted = a.float() if a is not None else _act(xf, activation, approximate)
        dw, db = _wgrad(dyf, acted, x.dtype), dyf.sum(0)
    out["dx"].copy_(dx)
    out["dw"].copy_(dw)
    if "db" in out:
        out["db"].copy_(db)
