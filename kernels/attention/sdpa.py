"""PyTorch's fused attention backends on CUDA, each pinned so that a case it cannot take
is `unsupported` rather than silently run by another backend; `torch_sdpa` is whatever
PyTorch dispatches to. Packing is an explicit boolean mask: the backends that take no mask
refuse it."""

from __future__ import annotations

from typing import Mapping, Optional

import torch
from torch.nn.attention import SDPBackend

from bwd_suite.kernels.attention.torch_ref import _backward
from bwd_suite.suite.registry import implementation


def _fused_supports(name: str, mask_ok: bool, fp32_ok: bool, max_dim: int):
    def supports(p: Mapping) -> Optional[str]:
        if p["packing"] != "none" and not mask_ok:
            return f"{name} takes no attention mask (packed sequences)"
        if p["dtype"] == "float32" and not fp32_ok:
            return f"{name} takes 16-bit inputs only"
        if p["head_dim"] > max_dim or p["head_dim"] % 8:
            return f"{name} takes head dims that are multiples of 8 up to {max_dim}"
        return None
    return supports



@implementation("attention", "torch_sdpa", kind="native", version=torch.__version__,
                deterministic=False)
def torch_sdpa(*, q, k, v, o, lse, dout, seq_idx, causal, scale, out):
    """SDPA as PyTorch dispatches it (a fused backend where one applies)"""
    _backward([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION,
               SDPBackend.CUDNN_ATTENTION, SDPBackend.MATH],
              q, k, v, dout, seq_idx, causal, scale, out)


# The fused backends accumulate dq (FlashAttention's also dk, dv of grouped heads) with
# atomics in their backward: bitwise reproducibility is not claimed.
@implementation("attention", "torch_flash", kind="native", version=torch.__version__,
                devices=("cuda",), deterministic=False,
                supports=_fused_supports("the flash backend", False, False, 256))
def torch_flash(*, q, k, v, o, lse, dout, seq_idx, causal, scale, out):
    """SDPA pinned to its FlashAttention-2 backend"""
    _backward([SDPBackend.FLASH_ATTENTION], q, k, v, dout, seq_idx, causal, scale, out)


@implementation("attention", "torch_efficient", kind="native", version=torch.__version__,
                devices=("cuda",), deterministic=False,
                supports=_fused_supports("the memory-efficient backend", True, True, 256))
def torch_efficient(*, q, k, v, o, lse, dout, seq_idx, causal, scale, out):
    """SDPA pinned to its memory-efficient (xFormers) backend"""
    _backward([SDPBackend.EFFICIENT_ATTENTION], q, k, v, dout, seq_idx, causal, scale, out)


@implementation("attention", "torch_cudnn", kind="native", version=torch.__version__,
                devices=("cuda",), deterministic=False,
                supports=_fused_supports("the cuDNN backend", False, False, 128))
def torch_cudnn(*, q, k, v, o, lse, dout, seq_idx, causal, scale, out):
    """SDPA pinned to its cuDNN backend"""
    _backward([SDPBackend.CUDNN_ATTENTION], q, k, v, dout, seq_idx, causal, scale, out)
