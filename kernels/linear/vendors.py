"""Vendor linear backwards with fused epilogues: Apex's fused_dense and TransformerEngine's
Linear. Neither package is on our machines: both register disabled with the import's
reason there, and neither adapter has run yet; each is written from the vendor's API as
shared/reference/attention_linear_step.md section 2 records it.

- `apex_fused_dense`: `fused_dense_cuda.linear_bias_backward(input, weight, grad_output)`
  -> (grad_input, grad_weight, grad_bias), the wgrad GEMM with cuBLASLt's BGRADB. Its
  fused layer is the plain linear with bias (the GELU one, linear_gelu_linear, spans two
  layers); where its heuristic finds no algorithm it falls back to a GEMM without the bias
  gradient and leaves grad_bias as allocated (a latent bug by code reading: the
  unwritten-output check is the probe for it).
- `te_linear`: `transformer_engine.pytorch.Linear` through autograd (its backward is TE's
  general GEMM with the BGRAD epilogue); no activation (TE fuses GELU in LayerNormMLP,
  another op).

Both are two-phase: the untimed phase builds what the backward reads, the timed call is
the vendor's backward alone, returning its own tensors.
"""

from __future__ import annotations

from typing import Mapping, Optional

import torch

from bwd_suite.suite.registry import implementation

try:
    import fused_dense_cuda  # noqa: F401 - Apex's extension (setup.py --fused_dense)
    APEX, APEX_WHY = True, ""
except Exception as e:  # noqa: BLE001 - any import failure disables the adapter
    APEX, APEX_WHY = False, f"Apex's fused_dense_cuda is not importable: {type(e).__name__}: {e}"

try:
    import transformer_engine.pytorch as te  # noqa: F401
    TE, TE_WHY = True, ""
except Exception as e:  # noqa: BLE001
    TE, TE_WHY = False, f"transformer_engine is not importable: {type(e).__name__}: {e}"


def _row_major(p: Mapping) -> Optional[str]:
    if p["x_t"] or p["w_t"] or p["dy_t"]:
        return "takes row-major (contiguous) x, w and dy only"
    return None


def apex_supports(p: Mapping) -> Optional[str]:
    if p["activation"] != "none":
        return "Apex's fused_dense fuses no activation into a single layer's backward " \
               "(linear_gelu_linear spans two layers)"
    if not p["bias"]:
        return "Apex's linear_bias_backward always computes a bias gradient"
    return _row_major(p)


def te_supports(p: Mapping) -> Optional[str]:
    if p["activation"] != "none":
        return "te.pytorch.Linear has no activation (TE fuses GELU in LayerNormMLP)"
    return _row_major(p)


def _apex_prepare(*, x, w, dy, **_):
    return {"x": x, "w": w, "dy": dy}


@implementation("linear", "apex_fused_dense", kind="vendor", devices=("cuda",),
                prepare=_apex_prepare, supports=apex_supports, deterministic=False,
                enabled=APEX, disabled_reason=APEX_WHY)
def apex_fused_dense(*, saved, **_):
    """Apex fused_dense_cuda.linear_bias_backward: wgrad GEMM with BGRADB (backward alone)"""
    import fused_dense_cuda

    dx, dw, db = fused_dense_cuda.linear_bias_backward(saved["x"], saved["w"], saved["dy"])
    return {"dx": dx, "dw": dw, "db": db}


def _te_prepare(*, x, w, dy, bias, **_):
    import transformer_engine.pytorch as te

    layer = te.Linear(w.shape[1], w.shape[0], bias=bias is not None, params_dtype=w.dtype,
                      device=w.device)
    with torch.no_grad():
        layer.weight.copy_(w)
        if bias is not None:
            layer.bias.copy_(bias)
    leaf = x.detach().requires_grad_()
    with torch.enable_grad():
        y = layer(leaf)
    params = [layer.weight] + ([layer.bias] if bias is not None else [])
    return {"y": y, "leaves": [leaf, *params], "dy": dy}


@implementation("linear", "te_linear", kind="vendor", devices=("cuda",), prepare=_te_prepare,
                supports=te_supports, deterministic=False, enabled=TE, disabled_reason=TE_WHY)
def te_linear(*, saved, **_):
    """TransformerEngine's te.pytorch.Linear through autograd (backward alone)"""
    grads = torch.autograd.grad(saved["y"], saved["leaves"], saved["dy"], retain_graph=True)
    return dict(zip(("dx", "dw", "db"), grads))
