"""Adapter for Liger-Kernel's cross entropy (Triton, `liger_kernel.ops.cross_entropy`).

Liger's forward computes the loss and writes the gradient into the logits in the same
kernel (one program per row: an online max and sum over the row, then a second read of
the row for the gradient); its backward then scales that gradient by the upstream
gradient: in place for a scalar (skipped when it is exactly 1), into a new tensor for
reduction none. It is an in-place implementation (`in_place = {"dlogits": "logits"}`):
the suite hands it a fresh copy of the logits, outside the timed region, and checks that
copy as dlogits. Its per-token losses are kept in the logits dtype and summed there.
Liger has no alignment entry point: the targets go through `ops.cross_entropy.aligned`.
It counts the non-ignored tokens on the host (`.item()`, one sync a call). Registered
disabled, with the import error, where `liger_kernel` (or triton) does not import.
"""

from __future__ import annotations

import torch

from kernels.vendor import LIGER_HOW, not_importable, package_version
from ops.cross_entropy import aligned
from suite.registry import implementation

try:
    from liger_kernel.ops import cross_entropy as _lce

    VERSION, WHY_NOT = package_version("liger-kernel"), ""
except Exception as e:  # noqa: BLE001 - ImportError, or triton failing to load
    _lce = None
    VERSION, WHY_NOT = "", not_importable("liger_kernel", e, LIGER_HOW)


@implementation("cross_entropy", "liger", kind="vendor", devices=("cuda",),
                deterministic=True, version=VERSION, enabled=not WHY_NOT,
                disabled_reason=WHY_NOT, in_place={"dlogits": "logits"})
def liger(*, logits, targets, grad_loss, ignore_index, label_smoothing, reduction, z_loss,
          softcap, shift, seq_len, out):
    """Liger-Kernel's fused Triton cross entropy, dlogits written into the logits"""
    y = aligned(targets, shift, seq_len, ignore_index)
    # the kernel writes the gradient only for an input that requires one; a detached alias
    # of the handed tensor shares its storage
    x = logits.detach().requires_grad_(True)
    loss, _, _, _, x = _lce.cross_entropy_forward(x, y, None, ignore_index, z_loss,
                                                  label_smoothing, reduction,
                                                  softcap or None, False)
    dx = _lce.cross_entropy_backward(x, grad_loss.to(loss.dtype))
    with torch.no_grad():
        if dx.data_ptr() != logits.data_ptr():  # reduction none: Liger allocated it
            logits.copy_(dx)
        out["loss"].copy_(loss)
