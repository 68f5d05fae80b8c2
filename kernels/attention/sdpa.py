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


# Where PyTorch refuses without saying why (its checks state some reasons, not all: a
# disabled or unfit backend may print only "... not used because:"), what the case has
# that the backend is known not to take
_LIMITS = {
    SDPBackend.FLASH_ATTENTION: lambda q, k, m: [
        "fp32 (fp16/bf16 only)" if q.dtype == torch.float32 else "",
        "an explicit mask" if m is not None else ""],
    SDPBackend.EFFICIENT_ATTENTION: lambda q, k, m: [
        "grouped-query heads (no enable_gqa)" if q.shape[1] != k.shape[1] else ""],
    SDPBackend.CUDNN_ATTENTION: lambda q, k, m: [
        "fp32 (fp16/bf16 only)" if q.dtype == torch.float32 else "",
        f"head dim {q.shape[-1]} (multiples of 8 up to 128)"
        if q.shape[-1] % 8 or q.shape[-1] > 128 else ""],
}


def _stated(caught) -> list[str]:
    """PyTorch's warnings, without the location suffix and the bare section headers."""
    out = []
    for w in caught:
        text = re.sub(r"\s*\(Triggered internally at [^)]*\)\.?", "", str(w.message))
        text = re.sub(r"\s+", " ", text).strip()
        if text and not text.endswith("not used because:"):
            out.append(text)
    return list(dict.fromkeys(out))


def _refusing(backends, fn, q, k, mask):
    """`fn()` under `backends`; PyTorch's "No available kernel" as Unsupported, with the
    reasons PyTorch stated, or else the case's features the backend is known to refuse."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with sdpa_kernel(backends):
                return fn()
        except RuntimeError as e:
            if "No available kernel" not in str(e):
                raise
            why = _stated(caught)
            if why:
                raise Unsupported("No available kernel: " + "; ".join(why)) from None
            likely = [x for b in backends for x in _LIMITS.get(b, lambda *_: [])(q, k, mask)
                      if x]
            raise Unsupported("No available kernel, PyTorch stated no reason; the case has "
                              + (", ".join(likely) if likely else "nothing known to be "
                                 "refused")) from None


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

    o = _refusing(backends, forward, q, k, mask)
    return {"o": o, "leaves": leaves, "dout": dout}


def backward(saved) -> dict:
    """The timed phase: autograd's backward of the kept graph, fresh dq, dk, dv."""
    dq, dk, dv = torch.autograd.grad(saved["o"], saved["leaves"], saved["dout"],
                                     retain_graph=True)
    return {"dq": dq, "dk": dk, "dv": dv}


# What the first GPU runs found (torch 2.11, cuDNN 9.19, H100; cases/attention/
# findings.toml holds the smallest case of each): known failures, reported as such
CUDNN_NO_KEY = ("cuDNN gives a query that sees no key a wrong dq where the gradient is 0 "
                "(non-zero under a bottom-right mask with seq_q > seq_k, NaN on packed "
                "padding and on rows a boolean mask empties): cases/attention/findings.toml")
EFFICIENT_LOWER_RIGHT = ("the memory-efficient backend's lower-right causal mask with seq_q "
                         "> seq_k: dq off in rows that see keys (the same visibility as an "
                         "explicit mask passes): cases/attention/findings.toml")
EFFICIENT_ONE_KEY = ("fp32, one key: dS = dP - D cancels to rounding noise and dk sums 129 "
                     "such terms, 1.03 times its bound (a tolerance edge): "
                     "cases/attention/findings.toml")
_BOOL_MASK_NO_KEY = {"cuda:attention/masks/B1-H4-KV2-Tq20-Tk64-d32-fp16-bhsd-causal-bmask$":
                     CUDNN_NO_KEY,
                     "cuda:attention/empty-masked-keys/B1-H2-KV1-Tq64-Tk2-d32-fp16-full-bmask$":
                     CUDNN_NO_KEY,
                     "cuda:attention/cudnn-no-key-bool-mask/": CUDNN_NO_KEY}
_ONE_KEY = {"cuda:attention/lengths/B2-H2-KV2-Tq129-Tk1-d32-fp32-causal$": EFFICIENT_ONE_KEY,
            "cuda:attention/efficient-fp32-one-key/": EFFICIENT_ONE_KEY}
_LOWER_RIGHT = {"cuda:attention/lengths/B2-H2-KV2-Tq64-Tk7-d32-fp32-causal-br$":
                EFFICIENT_LOWER_RIGHT,
                "cuda:attention/efficient-lower-right-short-keys/": EFFICIENT_LOWER_RIGHT}


def _cudnn_no_key(p: Mapping) -> Optional[str]:
    return CUDNN_NO_KEY if masks.some_row_sees_nothing(p) else None


# torch_sdpa runs on the CPU too, where these pass: its cuDNN failures by id, on CUDA only
# (PyTorch dispatches a 16-bit case that needs a mask to cuDNN)
_SDPA_NO_KEY = {f"cuda:attention/{c}": CUDNN_NO_KEY for c in (
    "packing/B2-H2-KV2-T64-d32-bf16-causal-packpad-", "packing/B2-H2-KV2-T64-d32-bf16-full-packpad-",
    "long-packed/B2-H8-KV2-T1024-d128-bf16-causal-packpad-s4$",
    "empty-window-past-keys/B1-H2-KV1-Tq100-Tk20-d32-bf16-causal-wl4$",
    "empty-window-bottom-right/B1-H2-KV1-Tq90-Tk30-d32-bf16-full-br-wl2-wr2$",
    "empty-packed-padded-window/B3-H2-KV1-T64-d32-bf16-causal-wl5-packpad-s4$",
    "cudnn-no-key-padding/")}


KNOWN = {
    "torch_cudnn": ({}, _cudnn_no_key),
    "torch_cudnn_mask": (_BOOL_MASK_NO_KEY, _cudnn_no_key),
    "torch_efficient": ({**_ONE_KEY, **_LOWER_RIGHT,
                         "cuda:attention/near-square-swapped/B1-H1-KV1-Tq1024-Tk1023-d32-bf16-"
                         "causal-br$": EFFICIENT_LOWER_RIGHT,
                         # bf16: SDPA's own choice there is the flash backend, which passes
                         "cuda:attention/efficient-lower-right-fuzzed/": EFFICIENT_LOWER_RIGHT},
                        None),
    "torch_efficient_mask": (_ONE_KEY, None),
    "torch_sdpa": ({**_ONE_KEY, **_LOWER_RIGHT, **_BOOL_MASK_NO_KEY, **_SDPA_NO_KEY}, None),
}


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
    known, known_when = KNOWN.get(name, ({}, None))
    implementation("attention", name, kind="native", version=torch.__version__,
                   devices=devices, deterministic=deterministic, prepare=prepare,
                   supports=supports or supports_of(name, explicit, takes_mask),
                   known_failures=known, known_failure_when=known_when)(fn)
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
