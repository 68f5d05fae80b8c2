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
