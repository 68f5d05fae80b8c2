"""Linear backward port (held out): the three GEMMs run with TF32 on (the fast path left
enabled): their fp32 operands are rounded to 10 mantissa bits before an fp32-accumulated
product."""

import math

import torch


def _act(z, activation, approximate):
    if activation == "relu":
        return z.clamp_min(0)
    if activation == "silu":
        return z * torch.sigmoid(z)
    if approximate == "tanh":
        c, a = math.sqrt(2.0 / math.pi), 0.044715
        return 0.5 * z * (1 + torch.tanh(c * (z + a * z ** 3)))
    return z * 0.5 * (1 + torch.erf(z / math.sqrt(2.0)))


def _act_grad(z, activation, approximate):
    if activation == "relu":
        return (z > 0).to(z.dtype)
    if activation == "silu":
        s = torch.sigmoid(z)
        return s * (1 + z * (1 - s))
    if approximate == "tanh":
        c, a = math.sqrt(2.0 / math.pi), 0.044715
        t = torch.tanh(c * (z + a * z ** 3))
        return 0.5 * (1 + t) + 0.5 * z * (1 - t * t) * c * (1 + 3 * a * z * z)
    return 0.5 * (1 + torch.erf(z / math.sqrt(2.0))) + z * torch.exp(-0.5 * z * z) / math.sqrt(
        2 * math.pi)


def _tf32(t):
    """t (fp32) rounded to TF32's 10 mantissa bits, to nearest (ties away from zero)."""
    bits = t.contiguous().view(torch.int32)
    return ((bits + 0x1000) & ~0x1FFF).view(torch.float32)


def _gemm(a, b):
    return _tf32(a) @ _tf32(b)  # bug: fp32 operands rounded to TF32


def backward(*, x, w, dy, bias, z, a, activation, approximate, act_at, out):
    xf, wf, dyf = x.float(), w.float(), dy.float()
    if act_at == "output":
        dz = dyf
        if activation != "none":
            pre = z.float() if z is not None else _gemm(xf, wf.t()) + (
                bias.float() if bias is not None else 0.0)
            dz = dyf * _act_grad(pre, activation, approximate)
        out["dx"].copy_(_gemm(dz, wf))
        out["dw"].copy_(_gemm(dz.t(), xf))
        if bias is not None:
            out["db"].copy_(dz.sum(0))
        return
    gx = _gemm(dyf, wf)
    acted = xf
    if activation != "none":
        gx = gx * _act_grad(xf, activation, approximate)
        acted = a.float() if a is not None else _act(xf, activation, approximate)
    out["dx"].copy_(gx)
    out["dw"].copy_(_gemm(dyf.t(), acted))
    if bias is not None:
        out["db"].copy_(dyf.sum(0))
