"""A tiled model of a FlashAttention-2 backward, in PyTorch (fp32 throughout).

The loops of FlashAttention-2's backward kernel (flash_bwd_kernel.h, seed 004 section 2),
with every (batch, head) of a tile at once:

    D = rowsum(dO * O)                         once, before the loops (its own kernel)
    for each key/value block j (Bc keys):      the kernel's thread blocks
        dK_j = dV_j = 0                        fp32 accumulators, per query head
        for each query block i (Br queries) that can see block j:
            S  = scale Q_i K_jᵀ, softcap, + bias, -inf where not seen
            P  = exp(S - lse_i)                the softmax recomputed from the saved lse
            dV_j += (P * Z / (1 - p))ᵀ dO_i
            dP = (dO_i V_jᵀ) * Z / (1 - p)
            dS = P * (dP - D_i), times 1 - tanh² with softcap
            dK_j += dSᵀ Q_i
            dQ_i += dS K_j                     atomics in the kernel; here in loop order
        dK_j *= scale; dK, dV of a key/value head = sums over its group's query heads
    dQ *= scale

The query blocks that can see a key block come from the alignment, causality and window
alone (FlashAttention's m_block_min / m_block_max); packing and an explicit mask act
inside the tiles. It takes o and lse from its inputs (the saved forward), the dropout
keep mask and the explicit mask as given (the mask holds the whole visibility; without
one the visibility is built from the attributes by masks.keep). A row that sees nothing
(lse = -inf) has P = 0 and zero gradients. The order of every sum is fixed: bitwise
reproducible.

`backward_tiled` is one function with keyword block sizes, so that tile-boundary
diagnoses and mutants (variants of this model) can reuse it.
"""

from __future__ import annotations

from typing import Mapping, Optional

import torch

from bwd_suite.kernels.attention.masks import capped_visible, grouped, offset
from bwd_suite.suite.registry import implementation

BLOCK_Q = 64  # Br, query rows a tile
BLOCK_K = 64  # Bc, keys a tile
MAX_TILES = 1 << 16  # a model of the loops, not a benchmark: past this, unsupported
F32 = torch.float32


def query_blocks(c0: int, c1: int, seq_q: int, seq_k: int, causal: bool, align: str,
                 window_left: int, window_right: int, block_q: int) -> range:
    """Starts of the query blocks that can see keys c0..c1-1: query i sees keys up to
    i + off + right and down to i + off - left (off by the alignment)."""
    off = offset(seq_q, seq_k, align)
    right = 0 if causal else window_right
    first = 0 if right < 0 else max(0, c0 - off - right)
    last = seq_q - 1 if window_left < 0 else min(seq_q - 1, c1 - 1 - off + window_left)
    if first > last:
        return range(0)
    return range(first // block_q * block_q, last + 1, block_q)


def backward_tiled(*, q, k, v, o, lse, dout, seq_idx, attn_mask, dropout_mask, causal,
                   align, window_left, window_right, softcap, scale, dropout, out,
                   block_q: int = BLOCK_Q, block_k: int = BLOCK_K):
    B, H, Tq, d = q.shape
    Hkv, Tk = k.shape[1], k.shape[2]
    G = H // Hkv
    qf, dof = grouped(q.float(), Hkv), grouped(dout.float(), Hkv)  # (B, Hkv, G, Tq, d)
    kf, vf = k.float().unsqueeze(2), v.float().unsqueeze(2)  # (B, Hkv, 1, Tk, d)
    lse_g = grouped(lse.float(), Hkv).unsqueeze(-1)  # (B, Hkv, G, Tq, 1)
    D = (dof * grouped(o.float(), Hkv)).sum(-1, keepdim=True)  # (B, Hkv, G, Tq, 1)
    dq = torch.zeros_like(qf)
    dk = torch.empty(B, Hkv, Tk, d, dtype=F32, device=q.device)
    dv = torch.empty_like(dk)
    keep_scale = 1.0 / (1.0 - dropout) if dropout > 0 else 1.0

    for c0 in range(0, Tk, block_k):
        c1 = min(Tk, c0 + block_k)
        kb, vb = kf[..., c0:c1, :], vf[..., c0:c1, :]
        dk_acc = torch.zeros(B, Hkv, G, c1 - c0, d, dtype=F32, device=q.device)
        dv_acc = torch.zeros_like(dk_acc)
        for r0 in query_blocks(c0, c1, Tq, Tk, causal, align, window_left, window_right,
                               block_q):
            r1 = min(Tq, r0 + block_q)
            qb, dob = qf[..., r0:r1, :], dof[..., r0:r1, :]
            s = (qb @ kb.transpose(-1, -2)) * scale  # (B, Hkv, G, Br, Bc)
            s, t, seen = capped_visible(s, softcap=softcap, attn_mask=attn_mask,
                                        seq_idx=seq_idx, causal=causal, seq_q=Tq, seq_k=Tk,
                                        align=align, window_left=window_left,
                                        window_right=window_right, rows=(r0, r1),
                                        cols=(c0, c1))
            p = torch.where(seen, torch.exp(s - lse_g[..., r0:r1, :]), 0.0)
            pd, z = p, None
            if dropout > 0:
                z = grouped(dropout_mask[:, :, r0:r1, c0:c1], Hkv).to(F32) * keep_scale
                pd = p * z
            dv_acc += pd.transpose(-1, -2) @ dob
            dp = dob @ vb.transpose(-1, -2)
            if z is not None:
                dp = dp * z
            ds = p * (dp - D[..., r0:r1, :])
            if t is not None:
                ds = ds * (1.0 - t * t)
            dk_acc += ds.transpose(-1, -2) @ qb
            dq[..., r0:r1, :] += ds @ kb
        dk[:, :, c0:c1] = (dk_acc * scale).sum(2)
        dv[:, :, c0:c1] = dv_acc.sum(2)

    out["dq"].copy_((dq * scale).reshape(B, H, Tq, d))
    out["dk"].copy_(dk)
    out["dv"].copy_(dv)


def _supports(p: Mapping) -> Optional[str]:
    tiles = -(-p["seq_q"] // BLOCK_Q) * -(-p["seq_k"] // BLOCK_K)
    if tiles > MAX_TILES:
        return (f"a model of the kernel's loops, not a benchmark: {tiles} tiles of "
                f"{BLOCK_Q} x {BLOCK_K} (at most {MAX_TILES})")
    return None


@implementation("attention", "torch_tiled", kind="reference", deterministic=True,
                version=torch.__version__, supports=_supports)
def torch_tiled(**kw):
    """fp32 tiled model of a FlashAttention-2 backward (key blocks outer, P from lse)"""
    backward_tiled(**kw)
