"""The float64 attention backward that the diagnosis's stories are computed with
(ops/attention_diagnosis.py): from the saved statistics as a FlashAttention-style kernel
takes them (P = exp(S - lse), D = rowsum(dO * o)), or with the forward recomputed; under
the case's visibility or another one (the causal offset and the window's band); and
computed as the golden does or otherwise, as a bug would (a Variant). The visibility in
closed form (which queries see some key) is here too, for the diagnosis's regions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Optional

import torch

F64 = torch.float64
CHUNK_SCORES = 1 << 20  # scores of the query heads computed at once (8 MB a temporary)


# ---------------------------------------------------------------- visibility

def offset(p: Mapping, align: Optional[str] = None) -> int:
    """Key j = i + offset is the last one query i sees under causality."""
    align = align or p["align"]
    return p["seq_k"] - p["seq_q"] if align == "bottom_right" else 0


def band(p: Mapping) -> tuple:
    """(lo, hi) of j - i - offset that the rules allow; None where unbounded."""
    lo = -p["window_left"] if p["window_left"] >= 0 else None
    his = [h for h in (0 if p["causal"] else None,
                       p["window_right"] if p["window_right"] >= 0 else None)
           if h is not None]
    return lo, min(his) if his else None


def row_bounds(Tq: int, Tk: int, off: int, lo: Optional[int], hi: Optional[int],
               device=None) -> tuple:
    """(first, last) int64 (Tq): the keys query i sees by the rules (none: first > last)."""
    c = torch.arange(Tq, device=device, dtype=torch.int64) + off
    first = (c + lo).clamp_min(0) if lo is not None else torch.zeros_like(c)
    last = (c + hi).clamp_max(Tk - 1) if hi is not None else torch.full_like(c, Tk - 1)
    return first, last


def segment_bounds(seg: torch.Tensor) -> tuple:
    """(first, last) int64 of each token's segment, per row of seq_idx (B, T): segments
    are contiguous runs."""
    B, T = seg.shape
    pos = torch.arange(T, device=seg.device).expand(B, T)
    change = torch.ones_like(seg, dtype=torch.bool)
    change[:, 1:] = seg[:, 1:] != seg[:, :-1]
    first = torch.where(change, pos, 0).cummax(1).values
    end = torch.ones_like(change)
    end[:, :-1] = change[:, 1:]
    last = torch.where(end, pos, T).flip(1).cummin(1).values.flip(1)
    return first, last


def seen_rows(p: Mapping, t: Mapping) -> torch.Tensor:
    """(B or 1, H or 1, Tq) bool: the query sees some key (closed form, no Tq x Tk)."""
    mask = t.get("attn_mask")
    if mask is not None:
        return (mask if mask.dtype == torch.bool else torch.isfinite(mask)).any(-1)
    first, last = row_bounds(p["seq_q"], p["seq_k"], offset(p), *band(p))
    seq_idx = t.get("seq_idx")
    if seq_idx is None:
        return (first <= last)[None, None]
    seg = seq_idx.long().cpu()
    s_first, s_last = segment_bounds(seg)
    return ((torch.maximum(first, s_first) <= torch.minimum(last, s_last))
            & (seg >= 0))[:, None]


@dataclass(frozen=True)
class Variant:
    """A backward computed otherwise than the golden, as a bug would, where neither the
    visibility's rules nor a term of the golden can say it (the default: as the golden)."""

    kv_interleaved: bool = False  # query head h reads key/value head h % Hkv, not h // G
    softcap_at_capped: bool = False  # the softcap's 1 - tanh^2 at the capped S, not S0 / c
    # S0 = scale Q K^T rounded to this dtype: "once" (the scaled product rounded) or
    # "product" (Q K^T rounded, then times the scale rounded again)
    scores_dtype: Optional[torch.dtype] = None
    scores_rounding: str = "once"
    padding_sees_padding: bool = False  # the packing rule seg[i] == seg[j] alone


EXACT = Variant()


def _scores(q, k, scale: float, variant: Variant):
    """S0 = scale Q K^T in float64, rounded as the variant says."""
    dt = variant.scores_dtype
    if dt is None:
        return (q @ k.transpose(-1, -2)) * scale
    if variant.scores_rounding == "product":
        return ((q @ k.transpose(-1, -2)).to(dt).to(F64) * scale).to(dt).to(F64)
    return ((q @ k.transpose(-1, -2)) * scale).to(dt).to(F64)


def visibility(p: Mapping, t: Mapping, b: int, heads: slice, off: int, lo, hi,
               variant: Variant = EXACT) -> tuple:
    """(seen (n or 1, Tq, Tk) bool, bias or None) of batch b and a slice of query heads:
    the rules with the given offset and band, or the explicit mask as it is."""
    mask = t.get("attn_mask")
    if mask is not None:
        m = mask[min(b, mask.shape[0] - 1)]
        m = m[heads] if m.shape[0] > 1 else m
        if m.dtype == torch.bool:
            return m, None
        seen = torch.isfinite(m)
        return seen, m.masked_fill(~seen, 0.0)
    Tq, Tk = p["seq_q"], p["seq_k"]
    device = t["q"].device
    rel = torch.arange(Tk, device=device)[None, :] - torch.arange(Tq, device=device)[:, None] \
        - off
    m = torch.ones(Tq, Tk, dtype=torch.bool, device=device)
    if lo is not None:
        m &= rel >= lo
    if hi is not None:
        m &= rel <= hi
    seq_idx = t.get("seq_idx")
    if seq_idx is not None:
        s = seq_idx[b].long().to(device)
        m &= s[:, None] == s[None, :]
        if not variant.padding_sees_padding:
            m &= s[:, None] >= 0
    return m[None], None


# ---------------------------------------------------------------- the saved-statistics backward

def kv_heads(H: int, Hkv: int, variant: Variant = EXACT, device=None) -> torch.Tensor:
    """(H,) int64 on `device`: the key/value head each query head reads."""
    h = torch.arange(H, device=device)
    return h % Hkv if variant.kv_interleaved else h // (H // Hkv)


def _heads(t: Mapping, attrs: Mapping, b: int, heads: slice, seen, bias, d_modes,
           recompute: bool = False, variant: Variant = EXACT) -> tuple:
    """dv (n, Tk, d) and {mode: (dq (n, Tq, d), dk (n, Tk, d))} of a slice of n query
    heads from the saved lse and o (`recompute`: from lse and o of the forward under this
    visibility), in float64; modes of D: rows (rowsum(dO * o)), zero, columns (sum of
    P * dP over the queries)."""
    kv = kv_heads(t["q"].shape[1], t["k"].shape[1], variant, t["q"].device)[heads]
    q, k, v = t["q"][b, heads], t["k"][b, kv], t["v"][b, kv]
    do, o = t["dout"][b, heads], t["o"][b, heads]
    scale, cap, drop = attrs["scale"], attrs.get("softcap", 0.0), attrs.get("dropout", 0.0)
    s = _scores(q, k, scale, variant)
    tanh = None
    if cap > 0:
        tanh = torch.tanh(s / cap)
        s = cap * tanh
        if variant.softcap_at_capped:
            tanh = torch.tanh(s)
    if bias is not None:
        s = s + bias
    s = s.masked_fill(~seen, -math.inf)
    lse = torch.logsumexp(s, -1, keepdim=True) if recompute else \
        t["lse"][b, heads].unsqueeze(-1)
    lse = lse.masked_fill(lse == -math.inf, math.inf)  # a row that sees nothing: P = 0
    p = torch.exp(s - lse)
    z = None
    if drop > 0:
        z = t["dropout_mask"][b, heads].to(F64) / (1.0 - drop)
    if recompute:
        o = (p if z is None else p * z) @ v
    dv = (p if z is None else p * z).transpose(-1, -2) @ do
    dp = do @ v.transpose(-1, -2)
    if z is not None:
        dp = dp * z
    found = {}
    for mode in d_modes:
        D = {"rows": lambda: (do * o).sum(-1, keepdim=True), "zero": lambda: 0.0,
             "columns": lambda: (p * dp).sum(-2, keepdim=True)}[mode]()
        ds = p * (dp - D)
        if tanh is not None:
            ds = ds * (1.0 - tanh * tanh)
        found[mode] = (scale * (ds @ k), scale * (ds.transpose(-1, -2) @ q))
    return dv, found


def saved_backward(p: Mapping, t: Mapping, attrs: Mapping, off: int, lo, hi,
                   d_modes=("rows",), first_head: bool = False,
                   recompute: bool = False, variant: Variant = EXACT) -> dict:
    """{name: {"dq", "dk", "dv"}} in float64 for each mode of D (name = the mode), and
    "first_head" (dk, dv of each key/value head from the first query head of its group
    alone) when asked; query heads in slices of at most CHUNK_SCORES scores. With
    `recompute`, lse and o are those of the forward under this visibility and variant (a
    kernel whose forward has the bug as well, or that recomputes it), not the saved
    ones."""
    B, H, Tq, d = t["q"].shape
    Hkv, Tk = t["k"].shape[1], t["k"].shape[2]
    G = H // Hkv
    # dk, dv per query head, summed over each group at the end
    res = {m: {"dq": torch.zeros_like(t["q"]), "dk": t["q"].new_zeros(B, H, Tk, d),
               "dv": t["q"].new_zeros(B, H, Tk, d)} for m in d_modes}
    n = max(1, CHUNK_SCORES // (Tq * Tk))
    for b in range(B):
        for h0 in range(0, H, n):
            heads = slice(h0, min(H, h0 + n))
            seen, bias = visibility(p, t, b, heads, off, lo, hi, variant)
            dv, grads = _heads(t, attrs, b, heads, seen, bias, d_modes, recompute, variant)
            for m, (dq, dk) in grads.items():
                res[m]["dq"][b, heads] = dq
                res[m]["dk"][b, heads] = dk
                res[m]["dv"][b, heads] = dv
    if first_head:
        first = res[d_modes[0]]
        res["first_head"] = {o: first[o][:, ::G].clone() for o in ("dk", "dv")}
    kv = kv_heads(H, Hkv, variant, t["q"].device)  # index_add_ wants it beside its operands
    for m in d_modes:
        for o in ("dk", "dv"):
            res[m][o] = t["q"].new_zeros(B, Hkv, Tk, d).index_add_(1, kv, res[m][o])
    return res
