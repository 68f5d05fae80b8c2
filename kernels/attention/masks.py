"""Which keys each query sees, built by the implementations from the case's attributes
(never taken from the golden, so that a mistake in one does not cancel in the other).

Query i sees key j when j - i - off lies in [-window_left, right], off = seq_k - seq_q
for the bottom-right alignment (FlashAttention's) and 0 for the top-left one (PyTorch's
`is_causal`), right = 0 when causal, else window_right; a window side of -1 is unbounded.
With packing (seq_q == seq_k) both tokens must also be of one segment, padding (-1)
sees and is seen by nothing.
"""

from __future__ import annotations

from typing import Optional

import torch


def offset(seq_q: int, seq_k: int, align: str) -> int:
    """Diagonal of the causal mask: key j = i + offset is the last one query i sees."""
    return seq_k - seq_q if align == "bottom_right" else 0


def keep(seq_idx: Optional[torch.Tensor], causal: bool, seq_q: int, seq_k: int, device, *,
         align: str = "top_left", window_left: int = -1, window_right: int = -1,
         rows: Optional[tuple] = None, cols: Optional[tuple] = None) -> torch.Tensor:
    """(B or 1, 1, r1 - r0, c1 - c0) bool: query i of rows = (r0, r1) (default all) sees
    key j of cols = (c0, c1) (default all)."""
    r0, r1 = rows or (0, seq_q)
    c0, c1 = cols or (0, seq_k)
    i = torch.arange(r0, r1, device=device).unsqueeze(-1)
    j = torch.arange(c0, c1, device=device).unsqueeze(0)
    rel = j - i - offset(seq_q, seq_k, align)  # 0 on the causal diagonal
    m = torch.ones(r1 - r0, c1 - c0, dtype=torch.bool, device=device)
    if causal:
        m &= rel <= 0
    if window_right >= 0:
        m &= rel <= window_right
    if window_left >= 0:
        m &= rel >= -window_left
    m = m[None, None]
    if seq_idx is not None:
        sq = seq_idx[:, r0:r1].long().to(device)
        sk = seq_idx[:, c0:c1].long().to(device)
        m = m & ((sq.unsqueeze(-1) == sk.unsqueeze(-2)) & (sq.unsqueeze(-1) >= 0)).unsqueeze(1)
    return m


def needs_mask(seq_idx, causal: bool, seq_q: int, seq_k: int, align: str,
               window_left: int, window_right: int) -> bool:
    """Whether the visibility is more than SDPA's `is_causal` (top-left) or nothing."""
    return (seq_idx is not None or window_left >= 0 or window_right >= 0
            or (causal and align == "bottom_right" and seq_q != seq_k))


def sdpa_mask(seq_idx: Optional[torch.Tensor], causal: bool, T: int, device, *,
              seq_k: Optional[int] = None, align: str = "top_left", window_left: int = -1,
              window_right: int = -1, attn_mask: Optional[torch.Tensor] = None
              ) -> Optional[torch.Tensor]:
    """SDPA's attn_mask: the case's explicit mask when it has one (it holds the whole
    visibility), else the keep mask where `is_causal` cannot say it (packing, windows,
    bottom-right causal with T != seq_k), else None (causality then by is_causal). T is
    the query length; seq_k defaults to it."""
    seq_k = T if seq_k is None else seq_k
    if attn_mask is not None:
        return attn_mask
    if not needs_mask(seq_idx, causal, T, seq_k, align, window_left, window_right):
        return None
    return keep(seq_idx, causal, T, seq_k, device, align=align, window_left=window_left,
                window_right=window_right)


def some_row_sees_nothing(p) -> bool:
    """Whether some query of case params `p` sees no key at all by its alignment, causal
    mask, window or packing padding (a boolean mask's random holes aside). The key range
    of query i moves monotonically with i, so the first and the last query tell."""
    if p.get("packing", "none") == "packed_padded":
        return True
    Tq, Tk = p["seq_q"], p["seq_k"]
    off = offset(Tq, Tk, p.get("align", "top_left"))
    left, right = p.get("window_left", -1), p.get("window_right", -1)
    right = 0 if p["causal"] else right
    for i in (0, Tq - 1):
        lo = 0 if left < 0 else max(0, i + off - left)
        hi = Tk - 1 if right < 0 else min(Tk - 1, i + off + right)
        if lo > hi:
            return True
    return False


def grouped(t: torch.Tensor, kv_heads: int) -> torch.Tensor:
    """(B, H, ...) as (B, Hkv, G, ...): the query heads of a key/value head together; a
    tensor of one head (a broadcast mask) as (B or 1, 1, 1, ...)."""
    if t.shape[1] == 1:
        return t.unsqueeze(2)
    return t.reshape(t.shape[0], kv_heads, t.shape[1] // kv_heads, *t.shape[2:])


def capped_visible(s: torch.Tensor, *, softcap: float, attn_mask, seq_idx, causal: bool,
                   seq_q: int, seq_k: int, align: str, window_left: int, window_right: int,
                   rows: tuple, cols: tuple) -> tuple:
    """(s, t, seen) for a block of scaled fp32 scores s (B, Hkv, G, rows, cols): the
    softcap applied (t = tanh(s / softcap), None without), then the case's additive mask
    added; seen the keys each query sees, from the case's mask when it has one, else
    built by `keep`."""
    t = None
    if softcap > 0:
        t = torch.tanh(s / softcap)
        s = softcap * t
    (r0, r1), (c0, c1) = rows, cols
    if attn_mask is None:
        seen = keep(seq_idx, causal, seq_q, seq_k, s.device, align=align,
                    window_left=window_left, window_right=window_right, rows=rows,
                    cols=cols).unsqueeze(2)
        return s, t, seen
    m = grouped(attn_mask[:, :, r0:r1, c0:c1], s.shape[1])
    if m.dtype == torch.bool:
        return s, t, m
    seen = torch.isfinite(m)
    return s + m.float().masked_fill(~seen, 0.0), t, seen
