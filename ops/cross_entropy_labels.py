"""Which labels a cross entropy case scores and how they line up with the logits: the
collator's masks, the causal-LM shift, a constant target. The op (ops/cross_entropy.py)
builds its inputs and trainer loop from them, the diagnosis (ops/cross_entropy_diagnosis.py)
its features and terms, and implementations without an alignment entry point call
`aligned`; all import them from here (ops.cross_entropy re-exports them).
"""

from __future__ import annotations

from typing import Mapping

import torch

def label_mask(p: Mapping) -> torch.Tensor:
    """Bool (B, T): the positions whose label the collator keeps (masks and eos), before
    any shift; deterministic from the parameters."""
    B, T = p["batch"], p["seq"]
    keep = torch.ones(B, T, dtype=torch.bool)
    last = torch.full((B,), T - 1)  # the EOS position of each sequence
    k, mask = p["mask_len"], p["mask"]
    if mask == "prompt":
        keep[:, :k] = False
    elif mask in ("padding_right", "padding_left"):
        for b in range(B):
            pad = k * (b + 1) // B
            if mask == "padding_right":
                keep[b, T - pad:] = False
                last[b] = T - 1 - pad
            else:
                keep[b, :pad] = False
    elif mask == "all_ignored_row":
        keep[0] = False
    elif mask == "all_ignored_batch":
        keep[:] = False
    if not p["eos"]:
        for b in range(B):
            if last[b] >= 0:
                keep[b, last[b]] = False
    return keep


def shift_targets(targets: torch.Tensor, seq_len: int, ignore_index: int) -> torch.Tensor:
    """Causal-LM alignment (HF ForCausalLMLoss): each sequence of seq_len labels shifted
    left by one, so position t is scored against the label of t + 1; the last position
    of each sequence gets ignore_index (never the next sequence's first label)."""
    t = targets.reshape(-1, seq_len)
    out = torch.full_like(t, ignore_index)
    out[:, :-1] = t[:, 1:]
    return out.reshape(-1)


def aligned(targets: torch.Tensor, shift: bool, seq_len: int, ignore_index: int):
    """The targets scored, for implementations with no alignment entry point."""
    return shift_targets(targets, seq_len, ignore_index) if shift else targets


def constant_target(p: Mapping):
    """The id every token has, or None when they are drawn (V = 1 draws only 0)."""
    return {"zero": 0, "last": p["vocab"] - 1, "class": p["target_class"]}.get(
        p["targets"], 0 if p["vocab"] == 1 else None)


def scored(p: Mapping) -> torch.Tensor:
    """Bool (B, T) of the positions scored, as far as the parameters decide it (a drawn id
    equal to an ignore_index inside the vocabulary is not foreseen)."""
    keep = label_mask(p)
    if constant_target(p) == p["ignore_index"]:
        keep[:] = False
    if p["shift"]:
        shifted = torch.zeros_like(keep)
        shifted[:, :-1] = keep[:, 1:]
        keep = shifted
    return keep


def empty_mean(p: Mapping) -> bool:
    """Some mean of the case is over zero tokens (PyTorch: NaN, the golden: 0)."""
    if p["reduction"] != "mean":
        return False
    keep = scored(p)
    if p["normalize"] == "micro_batch":
        return bool((keep.reshape(p["accumulation"], -1).sum(dim=1) == 0).any())
    return not bool(keep.any())
