"""Adapter for Liger-Kernel's LayerNorm backward (Triton, `liger_kernel.ops.layer_norm`).

`layer_norm_backward(dY, X, W, B, Mean, RSTD) -> (DX, DW, DB)` is the function that
`LigerLayerNormFunction.backward` calls on the saved tensors: one fused kernel over
`sm_count` programs, x and dy read once, dW/dB as per-program partial sums added by
`.sum(0)` on the host (no atomics). It needs W and B (B only for DB's dtype and shape)
and N <= 65536 (its BLOCK_SIZE). Registered disabled, with the import error, where
`liger_kernel` or triton does not import (any CPU-only machine).
"""

from __future__ import annotations

import torch

from kernels.vendor import LIGER_HOW, not_importable, package_version
from suite.registry import implementation

try:
    from liger_kernel.ops.layer_norm import layer_norm_backward as _liger_bwd

    VERSION, WHY_NOT = package_version("liger-kernel"), ""
except Exception as e:  # noqa: BLE001 - ImportError, or triton missing / unusable
    _liger_bwd = None
    VERSION, WHY_NOT = "", not_importable("liger_kernel", e, LIGER_HOW)


def supports(p) -> str | None:
    if not p["affine"]:
        return "Liger's LayerNorm takes W and B (affine only)"
    if p["hidden"] > 65536:
        return "hidden > 65536 exceeds Liger's BLOCK_SIZE"
    return None


@implementation("layer_norm", "liger", kind="vendor", devices=("cuda",), supports=supports,
                deterministic=False, version=VERSION, enabled=not WHY_NOT,
                disabled_reason=WHY_NOT)
def liger(*, x, dy, gamma, mean, rstd, out):
    """Liger-Kernel's fused Triton LayerNorm backward (two-stage dW/dB partial sums)"""
    beta = torch.zeros_like(gamma)
    dx, dw, db = _liger_bwd(dy.contiguous(), x.contiguous(), gamma, beta, mean, rstd)
    out["dx"].copy_(dx)
    out["dgamma"].copy_(dw)
    out["dbeta"].copy_(db)
