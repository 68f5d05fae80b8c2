"""PyTorch attention backwards, through autograd (the forward recomputed; the saved o and
lse unused).

`torch_ref` rounds where a fused 16-bit kernel (FlashAttention) rounds, eagerly: the
scores Q Kᵀ and the softmax in fp32 (on chip they stay in fp32 accumulators), P rounded
to the case dtype for the products with V and dO, those products in the case dtype
(fp32 accumulation, one rounding each); dS stays fp32 into dQ and dK. It is the
yardstick of the tolerance rule ("at most twice the error of a PyTorch implementation in
the same dtype", FlashAttention's rule), the same on every device. (FlashAttention's own
`attention_ref` with upcast off also rounds the scores to 16 bits: at scores of 30 in
bf16 that alone put dq 0.11 of its maximum off, past the bf16 ceiling.)
`torch_math` is SDPA's math backend, which upcasts 16-bit inputs on the CPU, and
`torch_fp32` the math backend on fp32 copies, rounded once. The fused backends
(`torch_flash`, `torch_efficient`, `torch_cudnn`) are PyTorch's CUDA kernels, each pinned
so that a case it cannot take is `unsupported` rather than silently run by another
backend; `torch_sdpa` is whatever PyTorch dispatches to.

Packing is an explicit boolean mask (segment equality, padding, causality folded in):
the fused backends that take no mask refuse it. The mask is built here, not taken from
the golden, so that a mistake in one does not cancel in the other.
"""

from __future__ import annotations

import contextlib
from typing import Mapping, Optional

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from bwd_suite.kernels.attention.masks import keep as visible, sdpa_mask
from bwd_suite.suite.registry import implementation


def _grads_into(out, q, k, v, dout, forward, dtype, context=None):
    """dq, dk, dv of `forward(q, k, v)` by autograd on copies in `dtype`, under `context`,
    copied into out (rounded there once)."""
    leaves = [t.detach().to(dtype).requires_grad_() for t in (q, k, v)]
    with torch.enable_grad(), context or contextlib.nullcontext():
        forward(*leaves).backward(dout.to(dtype))
    for name, leaf in zip(("dq", "dk", "dv"), leaves):
        out[name].copy_(leaf.grad)


def _backward(backends, q, k, v, dout, seq_idx, causal, scale, out, dtype=None):
    """dq, dk, dv by autograd of SDPA under `backends`, in `dtype` (default: the case's)."""
    mask = sdpa_mask(seq_idx, causal, q.shape[2], q.device)

    def forward(qq, kk, vv):
        return F.scaled_dot_product_attention(
            qq, kk, vv, attn_mask=mask, is_causal=causal and mask is None, scale=scale,
            enable_gqa=q.shape[1] != k.shape[1])

    _grads_into(out, q, k, v, dout, forward, dtype or q.dtype, sdpa_kernel(backends))


@implementation("attention", "torch_ref", kind="native", version=torch.__version__)
def torch_ref(*, q, k, v, o, lse, dout, seq_idx, causal, scale, out):
    """FlashAttention's rounding, eager: scores and softmax in fp32, P to the dtype"""
    dt, G = q.dtype, q.shape[1] // k.shape[1]
    keep = visible(seq_idx, causal, q.shape[2], q.device)
    seen = keep.any(-1, keepdim=True)  # a query that sees nothing gets P = 0, not NaN

    def forward(qq, kk, vv):
        kk, vv = kk.repeat_interleave(G, 1), vv.repeat_interleave(G, 1)
        scores = (qq.float() * scale) @ kk.float().transpose(-1, -2)  # fp32, as on chip
        scores = scores.masked_fill(~keep, float("-inf")).masked_fill(~seen, 0.0)
        return (torch.softmax(scores, dim=-1) * seen).to(dt) @ vv

    _grads_into(out, q, k, v, dout, forward, dt)


@implementation("attention", "torch_math", kind="native", version=torch.__version__)
def torch_math(*, q, k, v, o, lse, dout, seq_idx, causal, scale, out):
    """SDPA's math backend in the case dtype, through autograd"""
    _backward([SDPBackend.MATH], q, k, v, dout, seq_idx, causal, scale, out)


@implementation("attention", "torch_fp32", kind="reference", version=torch.__version__)
def torch_fp32(*, q, k, v, o, lse, dout, seq_idx, causal, scale, out):
    """SDPA's math backend on fp32 copies, rounded once at the store"""
    _backward([SDPBackend.MATH], q, k, v, dout, seq_idx, causal, scale, out,
              dtype=torch.float32)
