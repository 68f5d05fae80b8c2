"""Which keys each query sees, built by the implementations from the case's attributes
(never taken from the golden, so that a mistake in one does not cancel in the other)."""

from __future__ import annotations

from typing import Optional

import torch


def keep(seq_idx: Optional[torch.Tensor], causal: bool, T: int, device) -> torch.Tensor:
    """(B or 1, 1, T, T) bool: query i sees key j."""
    if seq_idx is None:
        m = torch.ones(1, 1, T, T, dtype=torch.bool, device=device)
    else:
        s = seq_idx.long()
        m = ((s.unsqueeze(-1) == s.unsqueeze(-2)) & (s.unsqueeze(-1) >= 0)).unsqueeze(1)
    return m.tril() if causal else m


def sdpa_mask(seq_idx: Optional[torch.Tensor], causal: bool, T: int, device) -> Optional[torch.Tensor]:
    """SDPA's attn_mask: the keep mask of packed rows, or None (causality then by is_causal)."""
    return None if seq_idx is None else keep(seq_idx, causal, T, device)
