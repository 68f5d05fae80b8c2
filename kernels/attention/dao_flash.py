"""FlashAttention's own packages, timed on their backward alone: `flash_attn` (FlashAttention
2, `flash_attn_func`) and its Hopper interface (`flash_attn_interface`, FlashAttention 3).
Registered disabled, with the reason, where the package is not importable (our GPU
machines have neither, and no package registry: build them elsewhere and carry the wheel).

Their layout is (B, T, H, d), the `bshd` layout's memory order; their causal mask is
aligned bottom-right (FlashAttention >= 2.1), a top-left one of unequal lengths is
`unsupported`; windows and softcap are native; GQA native (fewer key/value heads);
packing (varlen with cu_seqlens), explicit masks and dropout masks are not adapted.
"""

from __future__ import annotations

import importlib
from typing import Mapping, Optional

import torch

from bwd_suite.kernels.attention.sdpa import backward
from bwd_suite.kernels.vendor import not_importable, package_version
from bwd_suite.suite.registry import implementation

HOW = "build flash-attn for sm_90 elsewhere and install the wheel on the GPU machine"


def _load(module: str):
    try:
        return importlib.import_module(module), ""
    except Exception as e:  # noqa: BLE001 - any import failure disables the adapter
        return None, not_importable(module, e, HOW)


def supports(p: Mapping) -> Optional[str]:
    if p["dtype"] == "float32":
        return "FlashAttention takes 16-bit inputs only"
    if p.get("packing", "none") != "none":
        return "packed sequences (flash_attn_varlen_func) are not adapted"
    if p.get("mask", "none") != "none":
        return "FlashAttention takes no explicit mask"
    if p.get("dropout", 0.0):
        return "FlashAttention does not return its dropout mask in a usable form"
    seq_q, seq_k = p.get("seq_q", p.get("seq")), p.get("seq_k", p.get("seq"))
    if p["causal"] and p.get("align", "top_left") == "top_left" and seq_q != seq_k:
        return "FlashAttention's causal mask is aligned bottom-right"
    return None


def _prepare(func, *, q, k, v, dout, **attrs):
    # (B, H, T, d) logical views -> (B, T, H, d), a view for the bshd layout
    leaves = [t.detach().transpose(1, 2).requires_grad_() for t in (q, k, v)]
    left, right = attrs.get("window_left", -1), attrs.get("window_right", -1)
    with torch.enable_grad():
        o = func(*leaves, softmax_scale=attrs["scale"], causal=attrs["causal"],
                 window_size=(left, right), softcap=attrs.get("softcap", 0.0))
    o = o[0] if isinstance(o, tuple) else o
    return {"o": o, "leaves": leaves, "dout": dout.transpose(1, 2)}


def _grads(saved) -> dict:
    g = backward(saved)
    return {k: t.transpose(1, 2) for k, t in g.items()}


def _register(name: str, module: str, dist: str, doc: str):
    mod, why = _load(module)
    func = getattr(mod, "flash_attn_func", None) if mod else None

    def prepare(**kw):
        return _prepare(func, **{k: v for k, v in kw.items()
                                 if k not in ("o", "lse", "seq_idx", "attn_mask",
                                              "dropout_mask")})

    def fn(*, saved, **_):
        return _grads(saved)

    fn.__doc__, fn.__name__ = doc, name
    implementation("attention", name, kind="vendor", version=package_version(dist),
                   devices=("cuda",), deterministic=False, supports=supports,
                   prepare=prepare, enabled=func is not None,
                   disabled_reason=why or f"{module} has no flash_attn_func")(fn)


_register("flash_attn2", "flash_attn", "flash-attn",
          "FlashAttention 2's flash_attn_func (backward alone)")
_register("flash_attn3", "flash_attn_interface", "flash-attn-3",
          "FlashAttention 3's Hopper flash_attn_func (backward alone)")
