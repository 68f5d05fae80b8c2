"""Deliberately broken AdamW steps: each plants one bug a port of a fused multi-tensor
AdamW gets wrong into one fp32 model of the step (`step_fp32` below), one `Bug` switch
each.

The model: the gradients unscaled in fp32 and checked for inf/NaN (the whole call skipped
on one, found_inf = 1), the clip coefficient min(1, max_norm / (norm + 1e-6)) from the
fp32 global norm, then per tensor and step the decoupled decay, the fp32 moments, the
bias-corrected update on the fp32 master (or on an fp32 copy of the parameter), and one
rounding at the parameter's store. With no bug it passes every case.

The suite must fail every mutant on the default CI cases (mutation score 100%), and the
cross-case diagnosis should name the planted cause: each mutant's function carries
`planted_cause`, a value of `ops.adamw_causes.Cause`. Registered with kind "mutant",
so runs skip them unless asked.
"""

from __future__ import annotations

import enum
import math
from typing import FrozenSet

import torch

from bwd_suite.kernels.mutants import Mutant, register
from bwd_suite.ops.adamw_causes import Cause


class Bug(enum.Enum):
    BIAS_CORRECTION_MISSING = "the update leaves out the bias corrections 1 - b1^t, 1 - b2^t"
    BIAS_CORRECTION_NEXT_STEP = ("the bias corrections use t + 1 (the step count read after "
                                 "its increment)")
    COUPLED_L2 = ("weight decay added to the gradient as L2 (g + wd p into the moments), "
                  "not decoupled p (1 - lr wd)")
    EPS_IN_SQRT = "eps inside the square root: sqrt(v_hat + eps) in place of sqrt(v_hat) + eps"
    SKIP_IGNORED = ("an inf or NaN gradient sets found_inf but the step runs anyway (the "
                    "skip is not honoured)")
    CLIP_UNCAPPED = ("the clip coefficient max_norm / (norm + 1e-6) is not capped at 1: "
                     "gradients below max_norm are scaled up")
    MOMENTS_BF16 = "exp_avg and exp_avg_sq are stored in bf16 (rounded every step)"
    MASTER_NOT_WRITTEN = ("with master weights the master is updated but not cast back: the "
                          "parameter keeps its old value")
    STEP_PER_TENSOR = ("the step count advances per tensor: tensor i of the list is "
                       "corrected at step t + i")
    UNSCALE_MISSING = "the gradients are not divided by the loss scale"
    AMSGRAD_MAX_UNUSED = ("with amsgrad the running max of v is kept but the denominator "
                          "uses v")


def step_fp32(*, params, grads, master, exp_avg, exp_avg_sq, max_exp_avg_sq, lr, beta1,
              beta2, eps, weight_decay, step, steps, maximize, amsgrad, scaler, loss_scale,
              max_norm, out, bugs: FrozenSet[Bug] = frozenset()):
    B = bugs
    inv = 1.0 if Bug.UNSCALE_MISSING in B else 1.0 / loss_scale
    g = [x.float() * inv for x in grads]
    found = scaler and any(not bool(torch.isfinite(x).all()) for x in g)
    out["found_inf"].fill_(1.0 if found else 0.0)
    if found and Bug.SKIP_IGNORED not in B:
        return
    if max_norm > 0:
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(x) for x in g]))
        coef = max_norm / (norm + 1e-6)
        g = [x * (coef if Bug.CLIP_UNCAPPED in B else coef.clamp(max=1.0)) for x in g]
    for i in range(len(params)):
        w = (master[i] if master is not None else params[i]).float().clone()
        m, v = exp_avg[i], exp_avg_sq[i]
        vmax = max_exp_avg_sq[i] if amsgrad else None
        gi = -g[i] if maximize else g[i]
        for s in range(steps):
            t = step + s + (i if Bug.STEP_PER_TENSOR in B else 0) + \
                (1 if Bug.BIAS_CORRECTION_NEXT_STEP in B else 0)
            if Bug.COUPLED_L2 in B:
                gs = gi + weight_decay * w
            else:
                gs = gi
                w.mul_(1 - lr * weight_decay)
            m.mul_(beta1).add_(gs, alpha=1 - beta1)
            v.mul_(beta2).addcmul_(gs, gs, value=1 - beta2)
            if Bug.MOMENTS_BF16 in B:
                m.copy_(m.bfloat16().float())
                v.copy_(v.bfloat16().float())
            den_v = v
            if vmax is not None:
                torch.maximum(vmax, v, out=vmax)
                den_v = v if Bug.AMSGRAD_MAX_UNUSED in B else vmax
            if Bug.BIAS_CORRECTION_MISSING in B:
                bc1 = bc2 = 1.0
            else:
                bc1, bc2 = 1 - beta1 ** t, 1 - beta2 ** t
            if Bug.EPS_IN_SQRT in B:
                den = (den_v / bc2 + eps).sqrt()
            else:
                den = den_v.sqrt() / math.sqrt(bc2) + eps
            w.addcdiv_(m, den, value=-lr / bc1)
        if master is not None:
            master[i].copy_(w)
            if Bug.MASTER_NOT_WRITTEN in B:
                continue
        params[i].copy_(w)


def clean(**kw):
    """The model with no bug (not registered: tests wrap it to check it passes)."""
    step_fp32(**kw)


def _register(m: Mutant):
    return register("adamw", m, lambda m, **kw: step_fp32(**kw, bugs=frozenset({m.bug})))


C = Cause
bias_correction_missing = _register(Mutant(
    "mutant_adamw_bias_correction_missing", Bug.BIAS_CORRECTION_MISSING, C.BIAS_CORRECTION,
    "fail (mismatch) in params or master, by the update's share of the bias corrections "
    "(large at step 1, none at step 1000); the moments right"))
bias_correction_next_step = _register(Mutant(
    "mutant_adamw_bias_correction_next_step", Bug.BIAS_CORRECTION_NEXT_STEP,
    C.BIAS_CORRECTION,
    "fail (mismatch) in params or master at small step counts (the corrections of t + 1); "
    "the moments right"))
coupled_l2 = _register(Mutant(
    "mutant_adamw_coupled_l2", Bug.COUPLED_L2, C.COUPLED_DECAY,
    "fail (mismatch) in exp_avg and exp_avg_sq (and params), by the moments of wd p, only "
    "with weight decay"))
eps_in_sqrt = _register(Mutant(
    "mutant_adamw_eps_in_sqrt", Bug.EPS_IN_SQRT, C.EPS_IN_SQRT,
    "fail (mismatch) in params or master where v is small next to eps; the moments right"))
skip_ignored = _register(Mutant(
    "mutant_adamw_skip_ignored", Bug.SKIP_IGNORED, C.SKIP_IGNORED,
    "fail (mismatch, NaN) in params and moments, only with an inf or NaN gradient; "
    "found_inf right"))
clip_uncapped = _register(Mutant(
    "mutant_adamw_clip_uncapped", Bug.CLIP_UNCAPPED, C.CLIP_ABOVE_ONE,
    "fail (mismatch) in exp_avg and exp_avg_sq, only with max_norm above the gradients' "
    "norm; a clipping max_norm passes"))
moments_bf16 = _register(Mutant(
    "mutant_adamw_moments_bf16", Bug.MOMENTS_BF16, C.MOMENTS_16BIT,
    "fail (mismatch) in exp_avg and exp_avg_sq, every element, by their bf16 rounding"))
master_not_written = _register(Mutant(
    "mutant_adamw_master_not_written", Bug.MASTER_NOT_WRITTEN, C.MASTER_STALE,
    "fail (mismatch) in params only, by minus the update, only with master weights and an "
    "lr large enough to show past the 16-bit parameters' tolerance"))
step_per_tensor = _register(Mutant(
    "mutant_adamw_step_per_tensor", Bug.STEP_PER_TENSOR, C.STEP_PER_TENSOR,
    "fail (mismatch) in params or master in every tensor but the first, only with several "
    "tensors at small step counts; the moments right"))
unscale_missing = _register(Mutant(
    "mutant_adamw_unscale_missing", Bug.UNSCALE_MISSING, C.UNSCALE_MISSING,
    "fail (mismatch) in exp_avg and exp_avg_sq by the factor S (S^2), only with a loss "
    "scale and no clipping that would hide it"))
amsgrad_max_unused = _register(Mutant(
    "mutant_adamw_amsgrad_max_unused", Bug.AMSGRAD_MAX_UNUSED, C.AMSGRAD_UNUSED,
    "fail (mismatch) in params or master, only with amsgrad past step 1 (where the max "
    "exceeds v); max_exp_avg_sq and the moments right"))

ALL = (bias_correction_missing, bias_correction_next_step, coupled_l2, eps_in_sqrt,
       skip_ignored, clip_uncapped, moments_bf16, master_not_written, step_per_tensor,
       unscale_missing, amsgrad_max_unused)
