"""Deliberately broken cross entropies: each plants one bug a port of a fused cross-entropy
forward + backward (Liger's kernel, a trainer's loss alignment around it) gets wrong into
one model of the kernel (`forward_backward` below), one `Bug` switch each.

The model: the targets aligned with `ops.cross_entropy.aligned` (the shift inside each
sequence), the logits upcast (softcap c tanh(x / c) first), the lse by the row max and
the sum of exp, the per-token loss (1 - eps)(lse - x_y) + eps (lse - mean x) + z lse^2,
the gradient p (1 + 2 z lse) - (1 - eps)[j = y] - eps / V times the softcap derivative,
zero loss and gradient on ignored tokens, the reduction (a mean over the non-ignored
count, 0 with a zero gradient over none), and one rounding of dlogits at the store. It
computes in float64 internally (a model, not a kernel: rows near one-hot at logit scale
100 leave fp32's p - 1 no digits for a bug to hide behind), except where a bug is a
precision bug. With no bug it passes every case.

The suite must fail every mutant on the default CI cases (mutation score 100%), and the
cross-case diagnosis should name the planted cause: each mutant's function carries
`planted_cause`, a value of `ops.cross_entropy_causes.Cause`. Registered with kind
"mutant", so runs skip them unless asked.
"""

from __future__ import annotations

import enum
from typing import FrozenSet

import torch

from bwd_suite.kernels.mutants import Mutant, register
from bwd_suite.ops.cross_entropy import aligned
from bwd_suite.ops.cross_entropy_causes import Cause


class Bug(enum.Enum):
    MEAN_ALL_TOKENS = ("the mean divides by every token N, not by the count of non-ignored "
                       "tokens")
    SHIFT_IGNORED = ("the shift attribute is ignored: position t scored against its own "
                     "label")
    SHIFT_CROSSES = ("the flat batch is shifted (targets[1:]), not each sequence: the last "
                     "position of a sequence scores the next sequence's first label")
    IGNORED_GRAD = ("ignored tokens keep a gradient row (the softmax p), not 0; their loss "
                    "is 0")
    SMOOTHING_V_MINUS_1 = ("label smoothing spreads eps over the V - 1 other classes "
                           "(eps / (V - 1) each, the target none), not over all V")
    Z_LOSS_GRAD_MISSING = ("the z-loss is in the loss but its gradient 2 z lse p is left "
                           "out of dlogits")
    SOFTCAP_DERIVATIVE_MISSING = ("with a softcap the gradient is not multiplied by its "
                                  "derivative 1 - tanh^2(x / c)")
    EMPTY_MEAN_NAN = ("a mean over zero non-ignored tokens divides 0 by 0: NaN loss and "
                      "gradients (not 0)")
    LSE_IN_LOGITS_DTYPE = ("the lse is rounded to the logits dtype (a 16-bit accumulator "
                           "stored), the loss and p computed from it")


def _align(targets, shift, seq_len, ignore_index, bugs):
    if shift and Bug.SHIFT_CROSSES in bugs:
        out = torch.full_like(targets, ignore_index)
        out[:-1] = targets[1:]
        return out
    if Bug.SHIFT_IGNORED in bugs:
        shift = False
    return aligned(targets, shift, seq_len, ignore_index)


def forward_backward(*, logits, targets, grad_loss, out, ignore_index, label_smoothing,
                     reduction, z_loss, softcap, shift, seq_len,
                     bugs: FrozenSet[Bug] = frozenset()):
    B = bugs
    N, V = logits.shape
    y = _align(targets, shift, seq_len, ignore_index, B)
    valid = y != ignore_index
    x = logits.to(torch.float64)
    if softcap:
        xc = softcap * torch.tanh(x / softcap)
        # sech^2 = 1 - tanh^2, without its cancellation where tanh rounds to 1
        dcap = 1.0 / torch.cosh(x / softcap).square()
    else:
        xc, dcap = x, None
    m = xc.max(dim=1, keepdim=True).values if V else xc.new_zeros(N, 1)
    lse = m.squeeze(1) + (xc - m).exp().sum(dim=1).log()
    if Bug.LSE_IN_LOGITS_DTYPE in B:
        lse = lse.to(logits.dtype).to(torch.float64)
    p = (xc - lse[:, None]).exp()
    safe = torch.where(valid, y, torch.zeros_like(y))
    onehot = torch.zeros_like(x).scatter_(1, safe[:, None], 1.0)
    eps = label_smoothing
    if Bug.SMOOTHING_V_MINUS_1 in B and V > 1:
        smooth = (1 - onehot) / (V - 1)  # the weight of each class in the smoothing term
    else:
        smooth = torch.full_like(x, 1.0 / V)
    xy = (xc * onehot).sum(dim=1)
    loss_i = (1 - eps) * (lse - xy) + eps * (lse - (smooth * xc).sum(dim=1)) + \
        z_loss * lse * lse
    zg = 0.0 if Bug.Z_LOSS_GRAD_MISSING in B else 2 * z_loss * lse[:, None]
    grad = p * (1 + zg) - (1 - eps) * onehot - eps * smooth
    if Bug.IGNORED_GRAD in B:
        grad = torch.where(valid[:, None], grad, p)
    else:
        grad = torch.where(valid[:, None], grad, 0.0)
    if dcap is not None and Bug.SOFTCAP_DERIVATIVE_MISSING not in B:
        grad = grad * dcap
    loss_i = torch.where(valid, loss_i, 0.0)
    g = grad_loss.to(torch.float64)
    if reduction == "none":
        out["loss"].copy_(loss_i)
        out["dlogits"].copy_(g[:, None] * grad)
        return
    if reduction == "mean":
        count = float(N) if Bug.MEAN_ALL_TOKENS in B else float(valid.sum())
        if Bug.EMPTY_MEAN_NAN not in B:
            count = max(count, 1.0)
        # a tensor: 1 / 0 is inf, and the zero losses and rows times inf are NaN (a
        # Python float division would raise)
        a = torch.tensor(1.0, dtype=torch.float64) / count
    else:
        a = torch.tensor(1.0, dtype=torch.float64)
    out["loss"].copy_((loss_i * a).sum())
    out["dlogits"].copy_((g * a) * grad)


def clean(**kw):
    """The model with no bug (not registered: tests wrap it to check it passes)."""
    forward_backward(**kw)


def _register(m: Mutant):
    return register("cross_entropy", m, lambda m, **kw: forward_backward(
        **kw, bugs=frozenset({m.bug})))


C = Cause
mean_all_tokens = _register(Mutant(
    "mutant_ce_mean_all_tokens", Bug.MEAN_ALL_TOKENS, C.MEAN_COUNTS_IGNORED,
    "fail (mismatch) in loss and dlogits, by D / N - 1 times both, only with a mean over a "
    "batch with ignored tokens (no accumulation, or per-micro-batch means)"))
shift_ignored = _register(Mutant(
    "mutant_ce_shift_ignored", Bug.SHIFT_IGNORED, C.SHIFT_MISSING,
    "fail (mismatch) in loss and dlogits, every scored row, only with the shift"))
shift_crosses = _register(Mutant(
    "mutant_ce_shift_crosses_sequences", Bug.SHIFT_CROSSES, C.SHIFT_CROSSES,
    "fail (mismatch) in dlogits at the last position of every sequence but the last (and "
    "the loss), only with the shift and two or more sequences per call"))
ignored_grad = _register(Mutant(
    "mutant_ce_ignored_tokens_get_gradient", Bug.IGNORED_GRAD, C.IGNORED_GRADIENT,
    "fail (mismatch) in dlogits, only in the rows of ignored tokens, by their softmax p "
    "times the upstream gradient and the mean's 1 / D; the loss right"))
smoothing_v_minus_1 = _register(Mutant(
    "mutant_ce_smoothing_v_minus_1", Bug.SMOOTHING_V_MINUS_1, C.SMOOTHING_V_MINUS_1,
    "fail (mismatch) in dlogits (and the loss), only with label smoothing: the target's "
    "column off by eps / V, the others by eps / V - eps / (V - 1)"))
z_loss_grad_missing = _register(Mutant(
    "mutant_ce_z_loss_gradient_missing", Bug.Z_LOSS_GRAD_MISSING, C.Z_LOSS_GRADIENT,
    "fail (mismatch) in dlogits only, by -2 z lse p, only with z-loss; the loss right"))
softcap_derivative_missing = _register(Mutant(
    "mutant_ce_softcap_derivative_missing", Bug.SOFTCAP_DERIVATIVE_MISSING,
    C.SOFTCAP_DERIVATIVE,
    "fail (mismatch) in dlogits only, where tanh(x / c) is far from 0 (a small softcap or "
    "large logits), only with a softcap; the loss right"))
empty_mean_nan = _register(Mutant(
    "mutant_ce_empty_mean_nan", Bug.EMPTY_MEAN_NAN, C.EMPTY_MEAN_NAN,
    "fail (NaN) in loss and dlogits, only where a mean is over zero tokens (every label "
    "ignored, a per-micro-batch mean of an ignored micro-batch)"))
lse_in_logits_dtype = _register(Mutant(
    "mutant_ce_lse_in_logits_dtype", Bug.LSE_IN_LOGITS_DTYPE, C.LSE_PRECISION,
    "fail (mismatch) in the loss (held to fp32) and dlogits, by the rounding of the lse, "
    "with 16-bit logits, and in fp32 at logit scale 100 (near one-hot rows: p - 1 keeps "
    "too few digits)"))

ALL = (mean_all_tokens, shift_ignored, shift_crosses, ignored_grad, smoothing_v_minus_1,
       z_loss_grad_missing, softcap_derivative_missing, empty_mean_nan, lse_in_logits_dtype)
