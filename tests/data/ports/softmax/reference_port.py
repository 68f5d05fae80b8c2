"""A correct softmax backward port (the control): fp32 math, one rounding at the store."""

import torch


def backward(*, y, dy, mask, scale, out):
    yf = y.float()
    g = dy.float()
    if mask is not None:
        g = g * mask.float() * scale
    dot = (g * yf).sum(dim=-1, keepdim=True)
    out["dx"].copy_(yf * (g - dot))
