"""LayerNorm over the last dimension, forward and backward, closed form in float64.

Forward, per row of x (rows, N), with mean and rstd the row's statistics:

    mean = sum(x) / N;  var = sum((x - mean)^2) / N;  rstd = 1 / sqrt(var + eps)
    xhat = (x - mean) * rstd;  y = xhat * gamma + beta      (y = xhat without affine)

Backward, written from the formulas (no autograd), with g = dy * gamma (g = dy without
affine) and means over the row:

    dx     = rstd * (g - mean(g) - xhat * mean(g * xhat))     (the x-hat form, seed 002)
    dgamma = sum over rows of dy * xhat;   dbeta = sum over rows of dy

Which mean and rstd: the kernel contract passes the forward's saved statistics (fp32, as
PyTorch saves them) and the backward never recomputes them, so the truth here is the
backward formula above evaluated exactly (float64) at the inputs the kernel is given:
x, dy, gamma and the saved mean and rstd as they are, converted to float64 without
rounding. `backward` does not recompute mean or rstd from x. Recomputing them would charge
every implementation for the rounding of the saved statistics, which is not its error:
on a row of 1000 + N(0, 1) in fp32 the saved mean is off by up to half an ulp of 1000
(3e-5), which moves xhat, and so dx, by about 3e-5 relative, as large as the whole fp32
tolerance. Given the same (mean, rstd) the x-hat form and the x form of dx (seed 002) are
the same polynomial, so both are measured against this one value. When mean and rstd are
the exact float64 statistics of x (as `forward` returns them), `backward` is the gradient
of `forward`, which tests/layer_norm/test_golden.py checks against autograd.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor


def statistics(x: Tensor, eps: float) -> tuple[Tensor, Tensor]:
    """(mean, rstd) of each row, shape (rows,), in x's dtype (float64 for the truth)."""
    mean = x.mean(-1)
    var = ((x - mean[..., None]) ** 2).mean(-1)
    return mean, torch.rsqrt(var + eps)


def forward(x: Tensor, gamma: Optional[Tensor] = None, beta: Optional[Tensor] = None,
            eps: float = 1e-5) -> tuple[Tensor, Tensor, Tensor]:
    """(y, mean, rstd) in float64; mean and rstd are functions of x (differentiable)."""
    mean, rstd = statistics(x, eps)
    y = (x - mean[..., None]) * rstd[..., None]
    if gamma is not None:
        y = y * gamma
    if beta is not None:
        y = y + beta
    return y, mean, rstd


def backward(x: Tensor, dy: Tensor, mean: Tensor, rstd: Tensor,
             gamma: Optional[Tensor] = None) -> dict:
    """dx, and with gamma dgamma and dbeta, at the given saved mean and rstd (rows,)."""
    m, r = mean[..., None], rstd[..., None]
    xhat = (x - m) * r
    g = dy * gamma if gamma is not None else dy
    dx = r * (g - g.mean(-1, keepdim=True) - xhat * (g * xhat).mean(-1, keepdim=True))
    grads = {"dx": dx}
    if gamma is not None:
        grads["dgamma"] = (dy * xhat).sum(0)
        grads["dbeta"] = dy.sum(0)
    return grads


def terms(x: Tensor, dy: Tensor, mean: Tensor, rstd: Tensor,
          gamma: Optional[Tensor] = None) -> dict:
    """The named terms of each output, whose sum is the output (float64): dx's three,
    rstd * g, -rstd * mean(g) and -rstd * xhat * mean(g * xhat); dgamma and dbeta are one
    term each. A backward that forgets a term is off by -1 x it."""
    m, r = mean[..., None], rstd[..., None]
    xhat = (x - m) * r
    g = dy * gamma if gamma is not None else dy
    found = {"dx": {"g": r * g, "mean_g": (-r * g.mean(-1, keepdim=True)).expand_as(g),
                    "xhat_dot": -r * xhat * (g * xhat).mean(-1, keepdim=True)}}
    if gamma is not None:
        found["dgamma"] = {"dy_xhat": (dy * xhat).sum(0)}
        found["dbeta"] = {"dy": dy.sum(0)}
    return found
