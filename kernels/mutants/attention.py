"""Deliberately broken attention backwards: each plants one bug a port of a
FlashAttention-2 backward gets wrong into an fp32 model of the kernel (`backward_tiled`
below), one `Bug` switch each.

The model, FlashAttention-2's loops (seed 004 section 2) with the tile sizes of
ops/attention_causes.py:

    D = rowsum(dO * o)                         before the loops, from the saved o
    for each key/value block j of BLOCK_K keys (the outer loop, one thread block each):
        for the query blocks of BLOCK_Q rows that see block j (m_block_min..max):
            S  = scale Q Kⱼᵀ, softcap, + bias, -inf where not seen
            P  = exp(S - lse)                  the softmax from the saved lse
            dVⱼ += (P Z / (1-p))ᵀ dO,  dP = (dO Vⱼᵀ) Z / (1-p),  dS = P (dP - D)
            dS *= 1 - tanh² with softcap
            dQ += scale dS Kⱼ,  dKⱼ += scale dSᵀ Q
        store dKⱼ, dVⱼ: the sums over the query heads of each key/value head's group
    store dQ

in fp32, with every (batch, head) of a tile at once and the query blocks of one key block
as one batched step (the kernel walks them in a loop; batched here so that the CPU cost
stays a few torch calls per key block: the same sums, in another fp32 order). The
visibility is its own, built from the attributes (never the golden's): the causal
diagonal at i + off (off = Tk - Tq bottom-right, 0 top-left), the window around it and
packing; or the explicit mask alone when there is one (the blocks it skips included). A
row that sees nothing has lse = -inf, which the kernel reads as +inf (FlashAttention
stores INFINITY there), so that its P is 0 and its gradients are zero. With no bug it
passes every case.

The suite must fail every mutant on the default CI cases (mutation score 100%), and the
cross-case diagnosis should name the planted cause: each mutant's function carries
`planted_cause`, a value of `ops.attention_causes.Cause`. Registered with kind "mutant",
so runs skip them unless asked.
"""

from __future__ import annotations

import enum
from typing import FrozenSet, Optional

import torch

from bwd_suite.kernels.mutants import Mutant, register
from bwd_suite.ops.attention_causes import BLOCK_K, BLOCK_Q, Cause

F32 = torch.float32


class Bug(enum.Enum):
    WRONG_CORNER = ("the causal diagonal (and the window around it) aligned to the other "
                    "corner: top-left where the case says bottom-right and back")
    GQA_FIRST_HEAD = ("dk and dv of a key/value head are stored from the first query head "
                      "of its group only, not summed over the group")
    DS_SCALE_MISSING = "the softmax scale is left out of dQ = scale dS K and dK = scale dSᵀ Q"
    DS_SCALE_TWICE = ("the softmax scale is applied twice in dQ and dK (once folded into "
                      "dS, once more in the products)")
    D_MISSING = "D = rowsum(dO * o) is never computed: dS = P dP"
    D_OVER_QUERIES = ("D is reduced over the wrong axis: a column sum of P * dP over the "
                      "queries (one D per key) in place of the row sum over the keys")
    EMPTY_ROWS_NAN = ("the saved lse = -inf of a row that sees no key is used as is: "
                      "P = exp(-inf - (-inf)) = NaN")
    DK_DV_SWAPPED = "dk is stored into dv and dv into dk"
    LAST_KEY_BLOCK_DROPPED = ("the grid has Tk // BLOCK_K key blocks (rounded down): the "
                              "keys of the last, partial block are never processed")
    WINDOW_LEFT_EXCLUSIVE = ("the left edge of the sliding window is exclusive: query i sees "
                             "keys j > i + off - window_left, one key fewer")


def _offset(seq_q: int, seq_k: int, align: str, bugs: FrozenSet[Bug]) -> int:
    """Key j = i + offset is the last one query i sees under causality."""
    off = seq_k - seq_q if align == "bottom_right" else 0
    return (seq_k - seq_q) - off if Bug.WRONG_CORNER in bugs else off


def _rules(c0: int, c1: int, seq_q: int, seq_k: int, causal: bool, align: str,
           window_left: int, window_right: int, bugs, device) -> torch.Tensor:
    """(Tq, c1 - c0) bool: query i may see key j by alignment, causality and window."""
    i = torch.arange(seq_q, device=device)[:, None]
    j = torch.arange(c0, c1, device=device)[None, :]
    rel = j - i - _offset(seq_q, seq_k, align, bugs)  # 0 on the causal diagonal
    m = torch.ones(seq_q, c1 - c0, dtype=torch.bool, device=device)
    if causal:
        m &= rel <= 0
    if window_right >= 0:
        m &= rel <= window_right
    if window_left >= 0:
        m &= rel > -window_left if Bug.WINDOW_LEFT_EXCLUSIVE in bugs else rel >= -window_left
    return m


def _seen(rules: torch.Tensor, c0: int, c1: int, seq_idx, attn_mask, device):
    """(visible (B or 1, H or 1, Tq, c1 - c0) bool, bias or None) of keys c0..c1-1."""
    if attn_mask is not None:  # it holds the whole visibility: no other rule applies
        m = attn_mask[..., c0:c1]
        if m.dtype == torch.bool:
            return m, None
        seen = torch.isfinite(m)
        return seen, m.float().masked_fill(~seen, 0.0)
    m = rules[None, None]
    if seq_idx is not None:  # packing (Tq == Tk): one segment, padding (-1) sees nothing
        s = seq_idx.long().to(device)
        sq, sk = s[:, :, None], s[:, None, c0:c1]
        m = m & ((sq == sk) & (sq >= 0))[:, None]
    return m, None


def _query_range(may_see: torch.Tensor, block_q: int) -> Optional[tuple]:
    """The query blocks that may see some key of the block, as rows (r0, r1), or None:
    FlashAttention's m_block_min and m_block_max, from the rules (packing acts inside the
    tiles), or from the explicit mask itself (block-sparse skipping, as FlexAttention's
    block mask)."""
    rows = may_see.reshape(-1, *may_see.shape[-2:]).any(0).any(-1).nonzero()
    if not len(rows):
        return None
    first, last = int(rows[0]), int(rows[-1])
    return first // block_q * block_q, min(may_see.shape[-2], (last // block_q + 1) * block_q)


def backward_tiled(*, q, k, v, o, lse, dout, out, causal, scale, seq_idx=None,
                   attn_mask=None, dropout_mask=None, align="top_left", window_left=-1,
                   window_right=-1, softcap=0.0, dropout=0.0,
                   bugs: FrozenSet[Bug] = frozenset(), block_q: int = BLOCK_Q,
                   block_k: int = BLOCK_K):
    B, H, Tq, d = q.shape
    Hkv, Tk = k.shape[1], k.shape[2]
    G = H // Hkv
    qf, dof = q.float(), dout.float()
    kf = k.float().repeat_interleave(G, 1)  # query head h reads key/value head h // G
    vf = v.float().repeat_interleave(G, 1)
    D = (dof * o.float()).sum(-1, keepdim=True)  # (B, H, Tq, 1)
    L = lse.float().unsqueeze(-1)
    if Bug.EMPTY_ROWS_NAN not in bugs:
        L = L.masked_fill(L == float("-inf"), float("inf"))  # P = exp(-inf) = 0 there
    keep_scale = 1.0 / (1.0 - dropout) if dropout > 0 else 1.0
    ds_scale = 1.0 if Bug.DS_SCALE_MISSING in bugs else \
        scale * scale if Bug.DS_SCALE_TWICE in bugs else scale
    dq = torch.zeros(B, H, Tq, d, dtype=F32, device=q.device)
    dk_out, dv_out = (out["dv"], out["dk"]) if Bug.DK_DV_SWAPPED in bugs else \
        (out["dk"], out["dv"])
    n_blocks = Tk // block_k if Bug.LAST_KEY_BLOCK_DROPPED in bugs else -(-Tk // block_k)

    for c0 in range(0, n_blocks * block_k, block_k):
        c1 = min(Tk, c0 + block_k)
        kb, vb = kf[:, :, c0:c1], vf[:, :, c0:c1]
        dk_acc = torch.zeros(B, H, c1 - c0, d, dtype=F32, device=q.device)
        dv_acc = torch.zeros_like(dk_acc)
        rules = _rules(c0, c1, Tq, Tk, causal, align, window_left, window_right, bugs,
                       q.device)
        seen, bias = _seen(rules, c0, c1, seq_idx, attn_mask, q.device)
        rows = _query_range(rules if attn_mask is None else seen, block_q)
        if rows is not None:
            r0, r1 = rows
            qb, dob = qf[:, :, r0:r1], dof[:, :, r0:r1]
            s = (qb @ kb.transpose(-1, -2)) * scale  # (B, H, rows, keys)
            t = None
            if softcap > 0:
                t = torch.tanh(s / softcap)
                s = softcap * t
            if bias is not None:
                s = s + bias[:, :, r0:r1]
            s = s.masked_fill(~seen[:, :, r0:r1], float("-inf"))
            p = torch.exp(s - L[:, :, r0:r1])
            pd, z = p, None
            if dropout > 0:
                z = dropout_mask[:, :, r0:r1, c0:c1].to(F32) * keep_scale
                pd = p * z
            dv_acc += pd.transpose(-1, -2) @ dob
            dp = dob @ vb.transpose(-1, -2)
            if z is not None:
                dp = dp * z
            if Bug.D_MISSING in bugs:
                ds = p * dp
            elif Bug.D_OVER_QUERIES in bugs:
                ds = p * (dp - (p * dp).sum(-2, keepdim=True))
            else:
                ds = p * (dp - D[:, :, r0:r1])
            if t is not None:
                ds = ds * (1.0 - t * t)
            dk_acc += ds_scale * (ds.transpose(-1, -2) @ qb)
            dq[:, :, r0:r1] += ds_scale * (ds @ kb)
        grouped = (B, Hkv, G, c1 - c0, d)
        if Bug.GQA_FIRST_HEAD in bugs:
            dk_blk, dv_blk = dk_acc.reshape(grouped)[:, :, 0], dv_acc.reshape(grouped)[:, :, 0]
        else:
            dk_blk, dv_blk = dk_acc.reshape(grouped).sum(2), dv_acc.reshape(grouped).sum(2)
        dk_out[:, :, c0:c1].copy_(dk_blk)  # one thread block stores its keys' dk, dv
        dv_out[:, :, c0:c1].copy_(dv_blk)
    out["dq"].copy_(dq)


def clean(**kw):
    """The model with no bug (not registered: tests wrap it to check it passes)."""
    backward_tiled(**kw)


def _register(m: Mutant):
    return register("attention", m, lambda m, **kw: backward_tiled(
        **kw, bugs=frozenset({m.bug})))


wrong_corner = _register(Mutant(
    "mutant_attn_causal_wrong_corner", Bug.WRONG_CORNER, Cause.CAUSAL_CORNER,
    "fail (mismatch) in dq, dk, dv only with causal or a window, seq_q != seq_k and no "
    "explicit mask; error = the backward from the saved lse with the other corner's mask"))
gqa_first_head = _register(Mutant(
    "mutant_attn_gqa_first_head_only", Bug.GQA_FIRST_HEAD, Cause.GQA_GROUP_SUM,
    "fail (mismatch) in dk and dv, only with kv_heads < heads; error = minus the share of "
    "the other query heads of each group; dq right"))
ds_scale_missing = _register(Mutant(
    "mutant_attn_ds_scale_missing", Bug.DS_SCALE_MISSING, Cause.DS_SCALE_MISSING,
    "fail (mismatch) in dq and dk by exactly (1/scale - 1) x the gradient, only with a "
    "softmax scale other than 1; dv right"))
ds_scale_twice = _register(Mutant(
    "mutant_attn_ds_scale_twice", Bug.DS_SCALE_TWICE, Cause.DS_SCALE_TWICE,
    "fail (mismatch) in dq and dk by exactly (scale - 1) x the gradient, only with a "
    "softmax scale other than 1; dv right"))
d_missing = _register(Mutant(
    "mutant_attn_d_missing", Bug.D_MISSING, Cause.D_MISSING,
    "fail (mismatch) in dq and dk by exactly minus the D term (scale P D K, scale (P D)ᵀ "
    "Q); dv right"))
d_over_queries = _register(Mutant(
    "mutant_attn_d_over_queries", Bug.D_OVER_QUERIES, Cause.D_AXIS,
    "fail (mismatch) in dq and dk, by the difference of the column-sum D and the row-sum "
    "D; dv right"))
empty_rows_nan = _register(Mutant(
    "mutant_attn_empty_rows_nan", Bug.EMPTY_ROWS_NAN, Cause.EMPTY_ROWS_NAN,
    "fail (NaN) in dq at the rows that see no key, and in dk and dv of their heads, only "
    "with such rows (bottom-right with seq_q > seq_k, windows past the keys, padding)"))
dk_dv_swapped = _register(Mutant(
    "mutant_attn_dk_dv_swapped", Bug.DK_DV_SWAPPED, Cause.DK_DV_SWAPPED,
    "fail (mismatch) in dk and dv, error = dv - dk and dk - dv; dq right"))
last_key_block_dropped = _register(Mutant(
    "mutant_attn_last_key_block_dropped", Bug.LAST_KEY_BLOCK_DROPPED, Cause.KEY_TAIL,
    "fail (unwritten output) in dk and dv past the last multiple of 16 keys, and dq "
    "(mismatch) in rows that see those keys, only when seq_k is not a multiple of 16"))
window_left_exclusive = _register(Mutant(
    "mutant_attn_window_left_exclusive", Bug.WINDOW_LEFT_EXCLUSIVE, Cause.WINDOW_EDGE,
    "fail (mismatch) in dq, dk, dv only with window_left >= 0 and no explicit mask; error "
    "= the backward from the saved lse with the window one key narrower on the left"))

ALL = (wrong_corner, gqa_first_head, ds_scale_missing, ds_scale_twice, d_missing,
       d_over_queries, empty_rows_nan, dk_dv_swapped, last_key_block_dropped,
       window_left_exclusive)
