"""PyTorch attention backwards on every device: the eager yardstick and SDPA's math
backend.

`torch_ref` rounds where a fused 16-bit kernel (FlashAttention) rounds, in closed form
over blocks of query rows (no autograd, so memory stays bounded: a block's scores, and
fp32 accumulators of dk and dv per query head): the scores Q Kᵀ (from q * scale) and the
softmax in fp32 (on chip they stay in fp32 accumulators), with softcap, bias and dropout
in fp32; P (dropout applied) rounded to the case dtype for the products with V and dO;
dP = dO Vᵀ rounded once to the dtype; dS in fp32 into dQ (rounded once) and into dK;
dK and dV of each query head accumulated in fp32 over the blocks and rounded once, then
summed over a group's heads (fp32 sum, one rounding). These are the rounding points of
the autograd formulation it replaced (P.to(dtype) @ V with the scores in fp32). It is
the yardstick of the tolerance rule ("at most twice the error of a PyTorch
implementation in the same dtype", FlashAttention's rule), the same on every device.
(FlashAttention's own `attention_ref` with upcast off also rounds the scores to 16 bits:
at scores of 30 in bf16 that alone put dq 0.11 of its maximum off, past the bf16
ceiling.) It uses o and lse not at all: it recomputes the softmax.

`torch_math` is SDPA's math backend through autograd (it upcasts 16-bit inputs on the
CPU), and `torch_fp32` the math backend on fp32 copies, rounded once. They get the
visibility as an explicit mask (`masks.sdpa_mask`: the case's attn_mask, or one built
here for packing, windows and the bottom-right alignment; else `is_causal`, which is
top-left). SDPA has no softcap and draws its own dropout mask: those cases are
unsupported. PyTorch's fused backends are in sdpa.py.
"""

from __future__ import annotations

import contextlib
from typing import Mapping, Optional

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from bwd_suite.kernels.attention.masks import capped_visible, grouped, sdpa_mask
from bwd_suite.suite.registry import implementation

F32 = torch.float32
BLOCK_ELEMS = 1 << 24  # fp32 scores of a block of query rows (all heads), at most


def _grads_into(out, q, k, v, dout, forward, dtype, context=None):
    """dq, dk, dv of `forward(q, k, v)` by autograd on copies in `dtype`, under `context`,
    copied into out (rounded there once)."""
    leaves = [t.detach().to(dtype).requires_grad_() for t in (q, k, v)]
    with torch.enable_grad(), context or contextlib.nullcontext():
        forward(*leaves).backward(dout.to(dtype))
    for name, leaf in zip(("dq", "dk", "dv"), leaves):
        out[name].copy_(leaf.grad)


def _backward(backends, q, k, v, dout, seq_idx, causal, scale, out, dtype=None, *,
              attn_mask=None, align="top_left", window_left=-1, window_right=-1):
    """dq, dk, dv by autograd of SDPA under `backends`, in `dtype` (default: the case's).
    The visibility is `is_causal` (top-left) where that says it all, else an explicit
    mask: the case's attn_mask when it has one, else one built by masks.keep."""
    dtype = dtype or q.dtype
    mask = sdpa_mask(seq_idx, causal, q.shape[2], q.device, seq_k=k.shape[2], align=align,
                     window_left=window_left, window_right=window_right, attn_mask=attn_mask)
    if mask is not None and mask.is_floating_point():
        mask = mask.to(dtype)  # an additive mask in the compute dtype, as SDPA asks

    def forward(qq, kk, vv):
        return F.scaled_dot_product_attention(
            qq, kk, vv, attn_mask=mask, is_causal=causal and mask is None, scale=scale,
            enable_gqa=q.shape[1] != k.shape[1])

    _grads_into(out, q, k, v, dout, forward, dtype, sdpa_kernel(backends))


def _sdpa_supports(p: Mapping) -> Optional[str]:
    if p["softcap"] > 0:
        return "SDPA has no logit softcap"
    if p["dropout"] > 0:
        return "SDPA draws its own dropout mask and does not expose it"
    return None


def backward_eager(*, q, k, v, dout, seq_idx, attn_mask, dropout_mask, causal, align,
                   window_left, window_right, softcap, scale, dropout, out, o=None, lse=None,
                   block_elems: int = BLOCK_ELEMS):
    """The yardstick's backward (module docstring), one block of query rows at a time,
    every (batch, head) at once; o and lse unused (the softmax is recomputed)."""
    dt = q.dtype
    B, H, Tq, d = q.shape
    Hkv, Tk = k.shape[1], k.shape[2]
    G = H // Hkv
    kf, vf = k.float().unsqueeze(2), v.float().unsqueeze(2)  # (B, Hkv, 1, Tk, d)
    dk_h = torch.zeros(B, Hkv, G, Tk, d, dtype=F32, device=q.device)
    dv_h = torch.zeros_like(dk_h)
    rows = max(1, min(Tq, block_elems // max(1, B * H * Tk)))
    for r0 in range(0, Tq, rows):
        r1 = min(Tq, r0 + rows)
        qs = grouped(q[:, :, r0:r1].float() * scale, Hkv)  # (B, Hkv, G, n, d)
        do = grouped(dout[:, :, r0:r1], Hkv)
        s = qs @ kf.transpose(-1, -2)  # (B, Hkv, G, n, Tk) fp32, as on chip
        s, t, seen = capped_visible(s, softcap=softcap, attn_mask=attn_mask, seq_idx=seq_idx,
                                    causal=causal, seq_q=Tq, seq_k=Tk, align=align,
                                    window_left=window_left, window_right=window_right,
                                    rows=(r0, r1), cols=(0, Tk))
        any_seen = seen.any(-1, keepdim=True)  # a query that sees nothing: P = 0, not NaN
        s = s.masked_fill(~seen, float("-inf")).masked_fill(~any_seen, 0.0)
        p = torch.softmax(s, dim=-1) * any_seen
        z = None
        if dropout > 0:
            z = grouped(dropout_mask[:, :, r0:r1], Hkv).float() / (1.0 - dropout)
        pd = (p if z is None else p * z).to(dt).float()
        dv_h += pd.transpose(-1, -2) @ do.float()
        dp = (do.float() @ vf.transpose(-1, -2)).to(dt).float()
        if z is not None:
            dp = dp * z
        ds = p * (dp - (p * dp).sum(-1, keepdim=True))
        if t is not None:
            ds = ds * (1.0 - t * t)
        out["dq"][:, :, r0:r1] = ((ds @ kf) * scale).reshape(B, H, r1 - r0, d)
        dk_h += ds.transpose(-1, -2) @ qs
    for name, acc in (("dk", dk_h), ("dv", dv_h)):
        per_head = acc.to(dt)
        out[name].copy_(per_head[:, :, 0] if G == 1 else per_head.float().sum(2))


@implementation("attention", "torch_ref", kind="native", version=torch.__version__)
def torch_ref(*, q, k, v, o, lse, dout, seq_idx, attn_mask, dropout_mask, causal, align,
              window_left, window_right, softcap, scale, dropout, out):
    """FlashAttention's rounding, eager over query blocks: scores and softmax in fp32, P to
    the dtype"""
    backward_eager(q=q, k=k, v=v, o=o, lse=lse, dout=dout, seq_idx=seq_idx,
                   attn_mask=attn_mask, dropout_mask=dropout_mask, causal=causal, align=align,
                   window_left=window_left, window_right=window_right, softcap=softcap,
                   scale=scale, dropout=dropout, out=out)


@implementation("attention", "torch_math", kind="native", version=torch.__version__,
                supports=_sdpa_supports)
def torch_math(*, q, k, v, o, lse, dout, seq_idx, attn_mask, dropout_mask, causal, align,
               window_left, window_right, softcap, scale, dropout, out):
    """SDPA's math backend in the case dtype, through autograd"""
    _backward([SDPBackend.MATH], q, k, v, dout, seq_idx, causal, scale, out,
              attn_mask=attn_mask, align=align, window_left=window_left,
              window_right=window_right)


@implementation("attention", "torch_fp32", kind="reference", version=torch.__version__,
                supports=_sdpa_supports)
def torch_fp32(*, q, k, v, o, lse, dout, seq_idx, attn_mask, dropout_mask, causal, align,
               window_left, window_right, softcap, scale, dropout, out):
    """SDPA's math backend on fp32 copies, rounded once at the store"""
    _backward([SDPBackend.MATH], q, k, v, dout, seq_idx, causal, scale, out, dtype=F32,
              attn_mask=attn_mask, align=align, window_left=window_left,
              window_right=window_right)
