"""A correct LayerNorm backward port (the control): x-hat form in fp32 at the saved
statistics, one rounding at the store."""

import torch


def backward(*, x, dy, gamma, mean, rstd, out):
    xf, dyf = x.float(), dy.float()
    r = rstd.float()[:, None]
    xhat = (xf - mean.float()[:, None]) * r
    g = dyf * gamma.float() if gamma is not None else dyf
    c1 = g.mean(dim=-1, keepdim=True)
    c2 = (g * xhat).mean(dim=-1, keepdim=True)
    out["dx"].copy_(r * (g - c1 - xhat * c2))
    if gamma is not None:
        out["dgamma"].copy_((dyf * xhat).sum(dim=0))
        out["dbeta"].copy_(dyf.sum(dim=0))
