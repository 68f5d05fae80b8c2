"""Eager PyTorch softmax backward (+ dropout backward), in the case dtype.

`torch_ref` is PyTorch's own backward, called the way autograd of
`F.dropout(F.softmax(x, -1), p)` calls it: the dropout backward
`aten.native_dropout_backward(dy, mask, scale)` (dy * mask * scale, rounded to the case
dtype), then `aten._softmax_backward_data(g, y, dim=-1, input_dtype)`. It is the
same-dtype yardstick of the tolerance rule (ops/softmax.py names it by default).

`torch_fused_fp32` is what a fused kernel computes: y, dy upcast to fp32, the dropout
backward and the one row reduction in fp32, one rounding at the store. It skips the
rounding of g to the case dtype, so it should be at least as accurate as the yardstick.
"""

from __future__ import annotations

import torch

from bwd_suite.suite.registry import implementation

_aten = torch.ops.aten


# Fuzzed on the H200 (cases/softmax/findings.toml): bf16 rows of 13 near one-hot, one
# element 0.07 of max|golden| off on CUDA (the CPU kernel passes): the pattern of a
# product dy * y rounded to bf16 before y * sum is subtracted from it.
KNOWN_FAILURES = {
    "cuda:softmax/torch-bf16-one-hot/": "CUDA bf16 near one-hot row: one element 0.07 of "
                                        "max|golden| off (an intermediate rounded to bf16)",
}


@implementation("softmax", "torch_ref", kind="native", version=torch.__version__,
                known_failures=KNOWN_FAILURES)
def torch_ref(*, y, dy, mask, scale, out):
    """PyTorch's native_dropout_backward then _softmax_backward_data, in the case dtype"""
    g = dy if mask is None else _aten.native_dropout_backward(dy, mask, scale)
    _aten._softmax_backward_data.out(g, y, -1, y.dtype, grad_input=out["dx"])


@implementation("softmax", "torch_fused_fp32", kind="reference", version=torch.__version__)
def torch_fused_fp32(*, y, dy, mask, scale, out):
    """eager fused form: fp32 dropout backward and row reduction, one rounding at the end"""
    yf = y.float()
    g = dy.float()
    if mask is not None:
        g = torch.where(mask, g * scale, 0.0)
    dot = (g * yf).sum(dim=-1, keepdim=True)
    out["dx"].copy_(yf * (g - dot))
