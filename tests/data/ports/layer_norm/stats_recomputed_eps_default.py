"""LayerNorm backward port that recomputes mean and rstd from x (in fp32) instead of using
the saved ones, with eps fixed at PyTorch's default 1e-5 since the contract passes no eps."""

import torch

EPS = 1e-5


def backward(*, x, dy, gamma, mean, rstd, out):
    xf = x.float()
    mu = xf.mean(-1, keepdim=True)
    var = ((xf - mu) ** 2).mean(-1, keepdim=True)
    r = torch.rsqrt(var + EPS)
    xhat = (xf - mu) * r
    g = dy.float() * gamma.float() if gamma is not None else dy.float()
    out["dx"].copy_(r * (g - g.mean(-1, keepdim=True) - xhat * (g * xhat).mean(-1, keepdim=True)))
    if gamma is not None:
        out["dgamma"].copy_((dy.float() * xhat).sum(0))
        out["dbeta"].copy_(dy.float().sum(0))
