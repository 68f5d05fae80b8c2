"""Softmax backward along the last dimension, with an optional fused dropout backward,
closed form in float64 (no autograd).

Forward, per row of length N (the kernel contract saves y, not x):

    y   = softmax(x)                      (y_j = exp(x_j) / sum_k exp(x_k))
    out = y * keep * scale                with dropout (keep: bool mask, scale = 1/(1-p))
    out = y                               without

Backward, with dy the upstream gradient of `out` (of y without dropout):

    g  = dy * keep * scale                (dropout backward; g = dy without dropout)
    dx = y * (g - sum_j g_j y_j)          (the Jacobian y_i (delta_ij - y_j) applied to g)

One reduction per row, and it needs only y. A fully dropped row has g = 0, so dx = 0
exactly. N = 1 gives y = 1 and dx = 0 exactly.

The truth is computed from the y the kernel receives (the case-dtype values, converted to
float64 exactly), not from a float64 softmax of the logits: a kernel's contract is y, and
the rounding of y to the case dtype happened in the forward, outside the backward under
test. Such a y sums to 1 only up to that rounding; the formula above is still the exact
vector-Jacobian product at that y of the softmax Jacobian diag(y) - y y^T.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor


def forward(x: Tensor, keep: Optional[Tensor] = None, scale: Optional[float] = None):
    """(y, out) in float64, for the self-checks against autograd."""
    y = torch.softmax(x, dim=-1)
    out = y if keep is None else y * keep.to(y.dtype) * scale
    return y, out


def dropout_backward(dy: Tensor, keep: Optional[Tensor] = None,
                     scale: Optional[float] = None) -> Tensor:
    """g = dy * keep * scale (dy unchanged without a mask)."""
    if keep is None:
        return dy
    return dy * keep.to(dy.dtype) * scale


def backward(y: Tensor, dy: Tensor, mask: Optional[Tensor] = None,
             scale: Optional[float] = None) -> dict:
    """{"dx": y * (g - sum(g * y, -1))} in float64, g = dy * mask * scale (or dy).

    y: the saved softmax output (..., N), dy: the upstream gradient like y, mask: bool
    keep mask like y or None, scale: 1/(1-p) with a mask."""
    if mask is not None and scale is None:
        raise ValueError("a dropout mask needs its scale 1/(1-p)")
    y = y.to(torch.float64)
    g = dropout_backward(dy.to(torch.float64), mask, scale)
    dot = (g * y).sum(dim=-1, keepdim=True)
    return {"dx": y * (g - dot)}


def terms(y: Tensor, dy: Tensor, mask: Optional[Tensor] = None,
          scale: Optional[float] = None) -> dict:
    """The named terms of dx, whose sum is dx: {"dx": {"y_g": y * g, "rowsum": -y *
    rowsum(g * y)}} in float64 (g as in `backward`). A backward that forgets the row sum
    is off by -1 x "rowsum"."""
    y = y.to(torch.float64)
    g = dropout_backward(dy.to(torch.float64), mask, scale)
    return {"dx": {"y_g": y * g, "rowsum": -y * (g * y).sum(dim=-1, keepdim=True)}}
