"""PyTorch's own LayerNorm backward (`aten::native_layer_norm_backward`), the yardstick.

It is the backward kernel behind `torch.nn.functional.layer_norm`, called with the saved
mean and rstd exactly as the op's contract passes them (the autograd of
`F.layer_norm` would recompute the statistics in its forward instead). Same dtype as the
case: x, dy and dx in the case dtype, gamma and its gradients in gamma's dtype.

One CPU quirk: PyTorch's CPU kernel takes fp32 statistics for 16-bit x only when gamma
is fp32 (its "mixed type" path); with gamma in x's dtype or without affine it wants the
statistics in x's dtype. There gamma is passed as its exact fp32 upcast (ones without
affine, where only dx is asked for), so the statistics stay the fp32 inputs; dgamma and
dbeta are rounded to gamma's dtype at the copy. On CUDA the kernel has no mixed path
(16-bit x with fp32 gamma raises "expected scalar type BFloat16 but found Float", seen on
the H200 with torch 2.11): there x and dy go through it in fp32, as autocast runs
`layer_norm` in mixed-precision training, and dx is rounded to x's dtype at the copy. The
casts are part of its time, as they are of autocast's. Otherwise the call is direct.

Measured on the CPU (torch 2.13): on fp32 rows of 1000 + N(0, 1) its dx error
(1.25e-5, N = 256) is the x form's (1.14e-5), not the x-hat form's (6e-8), so the CPU
kernel evidently sums the raw x; at N = 1 in fp32 it leaves ~1.2e-4 where dx is exactly 0,
above the fp32 ceiling (those cases are in the gpu profile only). CUDA's kernel uses xhat.
"""

from __future__ import annotations

import torch

from bwd_suite.suite.registry import implementation


def _mixed_cpu_gamma(x, gamma):
    """gamma for the CPU kernel's fp32-statistics path, or gamma itself."""
    if x.device.type != "cpu" or x.dtype == torch.float32:
        return gamma
    if gamma is None:
        return torch.ones(x.shape[-1], dtype=torch.float32, device=x.device)
    return gamma.float()


def _autocast_upcast(x, dy, gamma):
    """x and dy in fp32 where CUDA's kernel would reject 16-bit x with fp32 gamma."""
    if x.device.type == "cuda" and gamma is not None and gamma.dtype != x.dtype:
        return x.float(), dy.float()
    return x, dy


# With one column and eps 1e-12 (rstd 1e6) the CPU kernel's fp16 dgamma is 0.2 off an exact
# 0 (torch 2.13). It passes: one fp32 rounding of x moves the exact dgamma by about 0.03
# there, and the ceiling rises to 8 times that (suite/tolerances.py).


@implementation("layer_norm", "torch_ref", kind="native", version=torch.__version__)
def torch_ref(*, x, dy, gamma, mean, rstd, out):
    """aten::native_layer_norm_backward with the saved fp32 mean and rstd"""
    M, N = x.shape
    x, dy = _autocast_upcast(x, dy, gamma)
    w = _mixed_cpu_gamma(x, gamma)
    mask = [True, gamma is not None, gamma is not None]
    dx, dgamma, dbeta = torch.ops.aten.native_layer_norm_backward(
        dy, x, [N], mean.view(M, 1), rstd.view(M, 1), w, w if gamma is not None else None,
        mask)
    out["dx"].copy_(dx)
    if gamma is not None:
        out["dgamma"].copy_(dgamma)
        out["dbeta"].copy_(dbeta)
