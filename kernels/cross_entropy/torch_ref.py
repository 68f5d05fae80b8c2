"""Eager PyTorch cross entropy through autograd: F.cross_entropy on the aligned targets
(`ops.cross_entropy.aligned`), the softcap c * tanh(x / c) in front and the z-loss
z * lse^2 (masked, reduced as the loss) composed around it, then backward with grad_loss.

`torch_ref` computes in the case dtype (the yardstick); `torch_fp32` upcasts the logits to
fp32 first (HF ForCausalLMLoss's `logits.float()`), rounding dlogits once at the end.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from bwd_suite.ops.cross_entropy import aligned, empty_mean
from bwd_suite.suite.registry import implementation

# PyTorch's mean over zero non-ignored tokens is 0/0 = NaN; the golden's convention is 0
# with a zero gradient (Liger's). Ids "mean-ignall" are such means; sweeps named
# "zero-token-mean" hold the others (a micro-batch all ignored under normalize =
# micro_batch, shift over one-token sequences).
_NAN = "PyTorch's mean over zero non-ignored tokens is NaN; the golden's is 0"
KNOWN_FAILURES = {"-mean-ignall": _NAN, "/zero-token-mean": _NAN}


def _nan_mean(params):
    """The same for any case, fuzzed ones included (their ids foretell nothing)."""
    return _NAN if empty_mean(params) else None


# fp16 label smoothing: F.cross_entropy sums sum_j log p_j over tokens in fp16 before it
# divides, so the loss overflows to inf once N V |log p| passes 65504 (CPU, torch 2.13)
_REF_KNOWN = dict(KNOWN_FAILURES, **{
    "/torch-fp16-smoothing-overflow/": "the fp16 smoothing sum overflows inside "
                                       "F.cross_entropy (loss inf)"})


def _loss(x, targets, grad_loss, *, ignore_index, label_smoothing, reduction, z_loss,
          softcap, shift, seq_len, out):
    x = x.detach().requires_grad_(True)
    y = aligned(targets, shift, seq_len, ignore_index)
    xc = softcap * torch.tanh(x / softcap) if softcap else x
    loss = F.cross_entropy(xc, y, ignore_index=ignore_index, reduction=reduction,
                           label_smoothing=label_smoothing)
    if z_loss:
        valid = y != ignore_index
        # (z lse) lse: lse^2 alone overflows fp16 once |lse| > 256 (fuzzed, V = 1)
        lse = torch.logsumexp(xc, dim=-1)
        zt = torch.where(valid, (z_loss * lse) * lse, 0.0).to(xc.dtype)
        if reduction == "none":
            loss = loss + zt
        elif reduction == "sum":
            loss = loss + zt.sum()
        else:
            loss = loss + (zt / valid.sum()).sum()  # divided first: an fp16 sum overflows
    loss.backward(grad_loss.to(loss.dtype))
    out["loss"].copy_(loss.detach())
    out["dlogits"].copy_(x.grad)


@implementation("cross_entropy", "torch_ref", kind="native", version=torch.__version__,
                known_failures=_REF_KNOWN, known_failure_when=_nan_mean)
def torch_ref(*, logits, targets, grad_loss, out, **attrs):
    """F.cross_entropy (softcap and z-loss composed) and autograd, in the case dtype"""
    _loss(logits, targets, grad_loss, out=out, **attrs)


@implementation("cross_entropy", "torch_fp32", kind="reference", version=torch.__version__,
                known_failures=KNOWN_FAILURES, known_failure_when=_nan_mean)
def torch_fp32(*, logits, targets, grad_loss, out, **attrs):
    """the same on logits upcast to fp32 (HF's logits.float()), dlogits rounded once"""
    _loss(logits.float(), targets, grad_loss, out=out, **attrs)
