"""Linear layer backward with an activation on either side, closed form in float64 (no
autograd).

Shapes: x (M, K), w (N, K) (PyTorch's weight, out x in), dy (M, N), bias (N,). The
activation sits after the GEMM (`act_at = "output"`) or before it, on the layer's input
(`act_at = "input"`, an MLP's second linear):

    output:  Z = x wᵀ + b,  Y = act(Z)
             dZ = dY ⊙ act'(Z),  dx = dZ w,  dw = dZᵀ x,  db = Σ_rows dZ
    input:   A = act(x),  Y = A wᵀ + b
             dx = (dY w) ⊙ act'(x),  dw = dYᵀ A,  db = Σ_rows dY

Z (output) or A (input) is what the forward saved (`z`, `a`), or, when the case says it is
recomputed, None here: the golden computes it exactly, from x, w and b (output) or x
(input). The derivatives:

    relu        act'(z) = 1 where z > 0, else 0 (PyTorch's threshold_backward at 0)
    gelu        act(z) = z Φ(z),  act'(z) = Φ(z) + z φ(z)   (Φ, φ the normal cdf and pdf)
    gelu tanh   act(z) = z (1 + t) / 2,  t = tanh(u),  u = √(2/π) (z + 0.044715 z³)
                act'(z) = (1 + t) / 2 + z (1 - t²) √(2/π) (1 + 3 · 0.044715 z²) / 2
    silu        act(z) = z s,  s = sigmoid(z),  act'(z) = s (1 + z (1 - s))

Every output is a sum: dx over N terms, dw and db over M.
"""

from __future__ import annotations

import math
from typing import Optional

import torch
from torch import Tensor

ACTIVATIONS = ("none", "relu", "gelu", "silu")
APPROXIMATES = ("none", "tanh")
POSITIONS = ("output", "input")
TANH_C = math.sqrt(2.0 / math.pi)
TANH_A = 0.044715


def act(z: Tensor, activation: str, approximate: str = "none") -> Tensor:
    """The activation itself."""
    if activation == "none":
        return z
    if activation == "relu":
        return z.clamp_min(0)
    if activation == "silu":
        return z * torch.sigmoid(z)
    if approximate == "tanh":
        return 0.5 * z * (1 + torch.tanh(TANH_C * (z + TANH_A * z ** 3)))
    return z * 0.5 * (1 + torch.erf(z / math.sqrt(2.0)))


def act_grad(z: Tensor, activation: str, approximate: str = "none") -> Tensor:
    """act'(z), elementwise."""
    if activation == "none":
        return torch.ones_like(z)
    if activation == "relu":
        return (z > 0).to(z.dtype)
    if activation == "silu":
        s = torch.sigmoid(z)
        return s * (1 + z * (1 - s))
    if approximate == "tanh":
        t = torch.tanh(TANH_C * (z + TANH_A * z ** 3))
        return 0.5 * (1 + t) + 0.5 * z * (1 - t * t) * TANH_C * (1 + 3 * TANH_A * z * z)
    cdf = 0.5 * (1 + torch.erf(z / math.sqrt(2.0)))
    pdf = torch.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
    return cdf + z * pdf


def preactivation(x: Tensor, w: Tensor, bias: Optional[Tensor]) -> Tensor:
    """Z = x wᵀ + b."""
    z = x @ w.transpose(0, 1)
    return z + bias if bias is not None else z


def backward(x: Tensor, w: Tensor, dy: Tensor, *, bias: Optional[Tensor] = None,
             z: Optional[Tensor] = None, a: Optional[Tensor] = None, activation: str = "none",
             approximate: str = "none", act_at: str = "output", has_bias: bool = False) -> dict:
    """{"dx", "dw"} and "db" with `has_bias`, in float64 (module docstring). `z` / `a`: the
    saved pre-activation (output) or activation of x (input); None: computed here."""
    x, w, dy = (t.to(torch.float64) for t in (x, w, dy))
    if act_at == "output":
        dz = dy
        if activation != "none":
            pre = z.to(torch.float64) if z is not None else preactivation(
                x, w, bias.to(torch.float64) if bias is not None else None)
            dz = dy * act_grad(pre, activation, approximate)
        out = {"dx": dz @ w, "dw": dz.transpose(0, 1) @ x}
        if has_bias:
            out["db"] = dz.sum(0)
        return out
    if act_at != "input":
        raise ValueError(f"act_at {act_at!r} is not one of {POSITIONS}")
    g = dy @ w
    if activation == "none":
        out = {"dx": g, "dw": dy.transpose(0, 1) @ x}
    else:
        acted = a.to(torch.float64) if a is not None else act(x, activation, approximate)
        out = {"dx": g * act_grad(x, activation, approximate),
               "dw": dy.transpose(0, 1) @ acted}
    if has_bias:
        out["db"] = dy.sum(0)
    return out
