"""Adapter for Liger-Kernel's LayerNorm backward (Triton, `liger_kernel.ops.layer_norm`).

`layer_norm_backward(dY, X, W, B, Mean, RSTD) -> (DX, DW, DB)` is the function that
`LigerLayerNormFunction.backward` calls on the saved tensors: one fused kernel
(`_layer_norm_backward_kernel`) over `sm_count` programs, x and dy read once, dW/dB as
per-program fp32 partial sums added by `.sum(0)` (no atomics). It allocates DX itself;
copying that into the suite's dx timed a whole extra pass (a quarter of Liger's time at
4096x8192 bf16 on the H200, `scripts/ncu_case.py --timeline`). So the adapter
launches that kernel itself, as `layer_norm_backward` does, with the suite's dx as DX;
where this Liger's kernel takes other arguments it calls `layer_norm_backward` and copies.
On the H200 the launched kernel takes the adapter's path: the timeline of one call shows
the kernel and Liger's two reductions and no copy.
Liger needs W and B (B only for DB's dtype) and N <= 65536 (its BLOCK_SIZE). Registered
disabled, with the import error, where `liger_kernel` or triton does not import (any
CPU-only machine).
"""

from __future__ import annotations

import importlib
import math

import torch

from bwd_suite.kernels.vendor import LIGER_HOW, not_importable, package_version
from bwd_suite.suite.registry import implementation

try:
    _lln = importlib.import_module("liger_kernel.ops.layer_norm")  # the module, not a symbol
    from liger_kernel.ops.utils import calculate_settings

    VERSION, WHY_NOT = package_version("liger-kernel"), ""
except Exception as e:  # noqa: BLE001 - ImportError, or triton missing / unusable
    _lln = calculate_settings = None
    VERSION, WHY_NOT = "", not_importable("liger_kernel", e, LIGER_HOW)

# The parameters of liger-kernel 0.8.5's _layer_norm_backward_kernel, in order.
KERNEL_ARGS = ("X_ptr", "stride_x", "W_ptr", "Mean_ptr", "stride_mean", "RSTD_ptr",
               "stride_rstd", "DX_ptr", "stride_dx", "DW_ptr", "stride_dw", "DB_ptr",
               "stride_db", "DY_ptr", "stride_dy", "n_rows", "n_cols", "rows_per_program",
               "BLOCK_SIZE", "COMPUTE_DW", "COMPUTE_DB")


def supports(p) -> str | None:
    if not p["affine"]:
        return "Liger's LayerNorm takes W and B (affine only)"
    if p["hidden"] > 65536:
        return "hidden > 65536 exceeds Liger's BLOCK_SIZE"
    return None


def _programs(device: torch.device) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count


def _launch(x, dy, gamma, mean, rstd, out) -> bool:
    """Liger's backward kernel into out["dx"], launched as layer_norm_backward launches it;
    False where the kernel is missing or takes other arguments."""
    kernel, dx = getattr(_lln, "_layer_norm_backward_kernel", None), out["dx"]
    if tuple(getattr(kernel, "arg_names", ())) != KERNEL_ARGS or dx.stride(-1) != 1:
        return False
    n_rows, n_cols = x.shape
    programs = _programs(x.device)
    dw = torch.empty((programs, n_cols), dtype=torch.float32, device=x.device)
    db = torch.empty((programs, n_cols), dtype=torch.float32, device=x.device)
    block, warps = calculate_settings(n_cols)
    kernel[(programs,)](x, x.stride(0), gamma, mean, mean.stride(0), rstd, rstd.stride(0),
                        dx, dx.stride(0), dw, dw.stride(0), db, db.stride(0), dy, dy.stride(0),
                        n_rows, n_cols, rows_per_program=math.ceil(n_rows / programs),
                        BLOCK_SIZE=block, COMPUTE_DW=True, COMPUTE_DB=True, num_warps=warps)
    for name, part in (("dgamma", dw), ("dbeta", db)):  # Liger: part.sum(0).to(W.dtype)
        if out[name].dtype == torch.float32:
            torch.sum(part, 0, out=out[name])
        else:
            out[name].copy_(part.sum(0))
    return True


# Found by the fuzzer on the H200 (cases/layer_norm/findings.toml, liger-kernel 0.8.5).
KNOWN_FAILURES = {
    "layer_norm/liger-one-column/": "hidden size 1: dx is 1e-5 where the exact dx is 0 (dy "
                                    "minus its row mean, one element, does not cancel exactly)",
    "layer_norm/liger-dgamma-million-rows/": "dgamma over 1048575 fp16 rows 2x the bound",
}


@implementation("layer_norm", "liger", kind="vendor", devices=("cuda",), supports=supports,
                deterministic=False, version=VERSION, enabled=not WHY_NOT,
                disabled_reason=WHY_NOT, known_failures=KNOWN_FAILURES)
def liger(*, x, dy, gamma, mean, rstd, out):
    """Liger-Kernel's fused Triton LayerNorm backward (two-stage dW/dB partial sums)"""
    x, dy = x.contiguous(), dy.contiguous()
    if _launch(x, dy, gamma, mean, rstd, out):
        return
    dx, dw, db = _lln.layer_norm_backward(dy, x, gamma, torch.zeros_like(gamma), mean, rstd)
    out["dx"].copy_(dx)
    out["dgamma"].copy_(dw)
    out["dbeta"].copy_(db)
