"""Linear backward port (held out): with the activation on the input, dw is formed from
the raw input x, dYᵀ x, instead of from the activation's output A = act(x)."""

import math

import torch


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


def backward(*, x, w, dy, bias, z, a, activation, approximate, act_at, out):
    xf, wf, dyf = x.float(), w.float(), dy.float()
    if act_at == "output":
        dz = dyf
        if activation != "none":
            pre = z.float() if z is not None else xf @ wf.t() + (
                bias.float() if bias is not None else 0.0)
            dz = dyf * _act_grad(pre, activation, approximate)
        out["dx"].copy_(dz @ wf)
        out["dw"].copy_(dz.t() @ xf)
        if bias is not None:
            out["db"].copy_(dz.sum(0))
        return
    gx = dyf @ wf
    if activation != "none":
        gx = gx * _act_grad(xf, activation, approximate)
    out["dx"].copy_(gx)
    out["dw"].copy_(dyf.t() @ xf)  # bug: dYᵀ act(x) (a, or act(x) recomputed)
    if bias is not None:
        out["db"].copy_(dyf.sum(0))
