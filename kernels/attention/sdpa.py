"""PyTorch's fused attention backends, timed on their backward alone.

Each is two-phase (docs/contract.md#two-phase-implementations): `prepare` runs SDPA's
forward under autograd, pinned to one backend, and keeps the graph; the timed call is
autograd's backward of that graph (`retain_graph`), the backend's own backward kernel and
nothing else, returning fresh dq, dk, dv. A pinned backend that refuses a case when called
(PyTorch raises "No available kernel" and warns why) makes the item `unsupported` with
PyTorch's stated reasons.

Two ways to say which keys a query sees, both run for every backend that takes them:
`torch_<backend>` uses `is_causal` (PyTorch's, top-left aligned) or, for a bottom-right
aligned causal mask of unequal lengths, PyTorch's `causal_lower_right` bias; and
`torch_<backend>_mask` an explicit boolean mask built by kernels/attention/masks.py (every
alignment, window and packing), or the case's own mask. What SDPA cannot express at all
(softcap, a dropout mask the caller can see) is `unsupported`.

The fused backends accumulate dq (FlashAttention's also dk, dv of grouped heads) with
atomics: bitwise reproducibility is not claimed.
"""

from __future__ import annotations

import re
import warnings
from typing import Mapping, Optional

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from bwd_suite.kernels.attention import masks
from bwd_suite.suite.registry import Unsupported, implementation

FUSED = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
         "cudnn": SDPBackend.CUDNN_ATTENTION}
DISPATCH = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION,
            SDPBackend.CUDNN_ATTENTION, SDPBackend.MATH]


def _get(p: Mapping, key: str, default):
    return p.get(key, default)  # params this op may not declare yet


def _lengths(q, k) -> tuple[int, int]:
    return q.shape[2], k.shape[2]


def _needs_mask(p: Mapping) -> Optional[str]:
    """What only an explicit mask expresses in the case, or None."""
    if p.get("packing", "none") != "none":
        return "packed sequences"
    if p.get("mask", "none") != "none":
        return f"the case's {p['mask']} mask"
    if _get(p, "window_left", -1) >= 0 or _get(p, "window_right", -1) >= 0:
        return "a sliding window"
    return None


def supports_of(name: str, explicit: Optional[bool], takes_mask: bool):
    """A pinned backend's static refusals: what SDPA cannot express, and what only a mask
    expresses where this variant passes none. Everything else PyTorch decides when called."""
    def supports(p: Mapping) -> Optional[str]:
        if _get(p, "softcap", 0.0):
            return "SDPA has no logit softcap"
        if _get(p, "dropout", 0.0):
            return "SDPA does not expose its dropout mask (the golden needs it)"
        if explicit and not takes_mask:
            return f"{name} takes no attention mask"
        why = _needs_mask(p)
        if why and explicit is False:
            return f"{name} with is_causal cannot express {why} (the _mask variant can)"
        return None
    return supports


def _refusing(backends, fn):
    """`fn()` under `backends`; PyTorch's "No available kernel" (with the reasons it warned)
    as Unsupported."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with sdpa_kernel(backends):
                return fn()
        except RuntimeError as e:
            if "No available kernel" not in str(e):
                raise
            why = [re.sub(r"\s+", " ", str(w.message)).strip() for w in caught]
            why = [w for w in why if "not used because" in w or "requires" in w] or why
            raise Unsupported("No available kernel: " + ("; ".join(dict.fromkeys(why))
                                                         or str(e).splitlines()[0])) from None


def _keep(q, k, seq_idx, attrs) -> torch.Tensor:
    """The boolean mask of the keys each query sees (kernels/attention/masks.py)."""
    return masks.keep(seq_idx, attrs["causal"], q.shape[2], k.shape[2], q.device,
                      align=attrs["align"], window_left=attrs["window_left"],
                      window_right=attrs["window_right"])


def _visibility(q, k, seq_idx, attn_mask, attrs, explicit):
    """(attn_mask, is_causal) for SDPA; `explicit` None: a mask only where is_causal and
    the lower-right causal bias cannot say it."""
    Tq, Tk = _lengths(q, k)
    causal, align = attrs["causal"], attrs.get("align", "top_left")
    if explicit is None:
        explicit = attn_mask is not None or seq_idx is not None or \
            attrs.get("window_left", -1) >= 0 or attrs.get("window_right", -1) >= 0
    if explicit:
        if attn_mask is not None:
            return attn_mask, False
        return _keep(q, k, seq_idx, attrs), False
    if causal and align == "bottom_right" and Tq != Tk:
        from torch.nn.attention.bias import causal_lower_right
        return causal_lower_right(Tq, Tk), False
    return None, causal


def _prepare(backends, explicit, *, q, k, v, dout, seq_idx=None, attn_mask=None, **attrs):
    """SDPA's forward under autograd on leaves sharing q, k, v's storage; the graph kept."""
    leaves = [t.detach().requires_grad_() for t in (q, k, v)]
    mask, is_causal = _visibility(q, k, seq_idx, attn_mask, attrs, explicit)

    def forward():
        with torch.enable_grad():
            return F.scaled_dot_product_attention(
                *leaves, attn_mask=mask, is_causal=is_causal, scale=attrs["scale"],
                enable_gqa=q.shape[1] != k.shape[1])

    o = _refusing(backends, forward)
    return {"o": o, "leaves": leaves, "dout": dout}


def backward(saved) -> dict:
    """The timed phase: autograd's backward of the kept graph, fresh dq, dk, dv."""
    dq, dk, dv = torch.autograd.grad(saved["o"], saved["leaves"], saved["dout"],
                                     retain_graph=True)
    return {"dq": dq, "dk": dk, "dv": dv}


_INPUTS = ("q", "k", "v", "o", "lse", "dout", "seq_idx", "attn_mask", "dropout_mask")


def _register(name: str, backends, explicit: Optional[bool], takes_mask: bool, doc: str,
              devices=("cuda",), deterministic=False, supports=None):
    """Register `name`: SDPA under `backends`, two-phase; `explicit` True: always a mask,
    False: never (is_causal), None: where needed."""
    def prepare(**kw):
        return _prepare(backends, explicit, **{k: v for k, v in kw.items()
                                               if k not in ("o", "lse", "dropout_mask")})

    def fn(*, saved, **_):
        return backward(saved)

    fn.__doc__ = doc
    fn.__name__ = fn.__qualname__ = name
    implementation("attention", name, kind="native", version=torch.__version__,
                   devices=devices, deterministic=deterministic, prepare=prepare,
                   supports=supports or supports_of(name, explicit, takes_mask))(fn)
    return fn


for _b, _backend in FUSED.items():
    _register(f"torch_{_b}", [_backend], False, _b != "flash",
              f"SDPA pinned to its {_b} backend, is_causal (backward alone)")
    if _b != "flash":  # the flash backend takes no mask
        _register(f"torch_{_b}_mask", [_backend], True, True,
                  f"SDPA pinned to its {_b} backend, an explicit boolean mask "
                  f"(backward alone)")
torch_sdpa = _register("torch_sdpa", DISPATCH, None, True,
                       "SDPA as PyTorch dispatches it, an explicit mask where one is needed "
                       "(backward alone)", devices=("cpu", "cuda"),
                       supports=supports_of("torch_sdpa", None, True))
