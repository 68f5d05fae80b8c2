"""The one tolerance table.

An output passes when its error against float64 is at most k times the error of the
same-dtype eager reference (the op's yardstick implementation, run on the same inputs and
device) plus a floor, and never above a ceiling:

    err      = max|impl - golden| / scale,       scale = max|golden| (1 when it is 0)
    spacing  = eps(output dtype) + subnormal spacing / scale
    fp32     = round_ulps * spacing + fp32_ulps * eps(fp32) + COND_FACTOR * err_conditioning
    ref      = fp32 where the yardstick is weak (below), else err_yardstick
    floor    = floor_ulps * spacing + floor_fp32_ulps * eps(fp32)
    allowed  = min(k * ref + floor + COND_FACTOR * err_conditioning,
                   max(ceiling[case dtype], fp32, 2 * subnormal spacing / scale))

This is FlashAttention's rule ("at most twice the error of a PyTorch implementation"),
with PyTorch's test_decomp floor so that a yardstick that happens to be exact does not
demand exactness, and a ceiling so that a poor yardstick cannot excuse a gross error.

`fp32` is what a computation in fp32 with one rounding to the output dtype at the end
reaches on this case. A yardstick of a 16-bit case worse than that (PyTorch's CPU
LayerNorm backward sums dgamma in 16-bit for 16-bit x) must not loosen the bound: every
item's bound uses `fp32` instead, the yardstick's own included (a verdict never depends
on a name), and the row says the yardstick was weak. An item beyond that bound with the
yardstick's own output bit for bit is the yardstick's arithmetic: the weak-yardstick
outcome, listed apart (suite/verdicts.py). The ceiling never sits below `fp32`: on
ill-conditioned cases (softmax rows near one-hot with dropout, long rows) a fixed per-dtype
cap failed every implementation, and a cap at one times the conditioning still failed
plain fp32 code (the eager fp32 softmax backward at 1.8x it on a one-hot row of 262144,
fuzzed on the H200). Outputs in the subnormal range of their dtype are rounded to its fixed
spacing there, which the relative precision does not describe: the floors carry it, and
the ceiling never sits below two of those spacings (a same-dtype computation rounding
twice there: PyTorch's fp16 cross entropy was 1.5 of them off on a dlogits of 8e-6, 1.07%
of it, against a 1% cap; fuzzed on the CPU).

err_conditioning is how far the float64 golden moves when every input is perturbed by one
fp32 rounding (relative 2^-23, random sign): the accuracy an fp32 computation cannot beat
on this case; for an op with a second legitimate truth (OpSpec.alternate_golden) at least
the distance between the two over COND_FACTOR. The ratio of two maximum errors is
unstable on ill-conditioned cases (large SiLU pre-activations): two correct fp32
implementations were 4x apart at x_scale 1000, while both stayed within 6.4x of this
estimate (CPU, 60 cases per scale).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from bwd_suite.suite.opspec import TolClass


@dataclass(frozen=True)
class Tolerance:
    k: float
    floor_ulps: float  # ulps of the output dtype
    reason: str
    floor_fp32_ulps: float = 0.0  # ulps of fp32 on top (reductions accumulate in fp32)
    # the fp32-with-one-rounding error: ulps of the output dtype (the rounding at the store)
    # and of fp32 (the accumulation, inner sums included)
    round_ulps: float = 1.0
    fp32_ulps: float = 64.0
    # for an output that declares its sum's length n (OutputSpec.terms), the fp32 ulps of
    # the floor and of `fp32` are at least this many times sqrt(n)
    sqrt_terms_ulps: float = 0.0

    def fp32_part(self, base: float, terms) -> float:
        """fp32 ulps of a sum of `terms` terms (None: unknown): `base`, or more for long
        sums."""
        return max(base, self.sqrt_terms_ulps * terms ** 0.5) if terms else base


# Why each number:
TOLERANCES = {
    TolClass.ELEMENTWISE: Tolerance(
        k=2.0, floor_ulps=2.0,
        reason="k=2 as FlashAttention's backward tests; a correct kernel rounds once at the "
               "store (half an ulp) but may round intermediates differently from the "
               "yardstick, so the floor is 2 ulps of the output dtype"),
    TolClass.REDUCTION: Tolerance(
        k=2.0, floor_ulps=2.0, floor_fp32_ulps=64.0,
        reason="sums over batch x time (up to ~1e5 terms) in a different order than the "
               "yardstick: fp32 summation error grows like sqrt(n) ulps, so an exact-looking "
               "yardstick still leaves 64 ulps of fp32 (7.6e-6 relative), plus the 2 ulps of "
               "the store in the output dtype (not 64 of them: a 16-bit output is summed "
               "in fp32 and rounded once); an output that says how many terms it sums "
               "(OutputSpec.terms, a GEMM's K) gets at least sqrt(n) fp32 ulps: a sequential "
               "fp32 sum of n unit terms of random sign was 0.24-0.45 sqrt(n) ulps of its "
               "max|sum| off (CPU, n = 64..16384, 128 x 128 outputs; blocked sums as MKL's "
               "stayed at 2-3 ulps), so a split-K-free kernel summing a long K in order "
               "passes beside a blocked yardstick", sqrt_terms_ulps=1.0),
    TolClass.STATE: Tolerance(
        k=2.0, floor_ulps=2.0,
        reason="state gradients are short sums plus a pure copy path, rounded once like "
               "elementwise outputs"),
}

# Multiplies the conditioning estimate; above the 6.4x measured for correct fp32 code.
COND_FACTOR = 8.0
EPS32 = torch.finfo(torch.float32).eps

# Absolute cap on the normalized error, by the dtype of the case's activations, so that a
# poor yardstick cannot excuse a gross error. Dao's own tests allow atol 5e-2 in bf16,
# 5e-3 in fp16 and 1e-3 in fp32 on unit-scale data. Measured on the H200 over the gpu
# profile, the eager yardstick's worst normalized error was 1.3e-2 in bf16,
# 2.3e-3 in fp16 and 5.6e-7 in fp32; the caps leave a factor of 4 or more above those.
# (16-bit eager at x_scale 1000 reached 0.13 bf16 / 0.023 fp16: with pre-activations in
# the thousands one bf16 ulp is 4, so those cases are fp32 only; see basic.toml.)
CEILINGS = {
    torch.float32: 1e-4,
    torch.float16: 1e-2,
    torch.bfloat16: 6e-2,
    torch.float64: 1e-10,
}
# the ceiling in spacings of the output dtype's subnormal range (module docstring)
SUBNORMAL_CEILING_ULPS = 2


def subnormal_spacing(out_dtype: torch.dtype, scale: float = 1.0) -> float:
    """The spacing of `out_dtype` below its smallest normal, relative to `scale`: no
    rounding to that dtype is finer, whatever the relative precision says (an fp16 output
    of 5e-6 is a subnormal, rounded to 6e-8, 1.2% of it)."""
    f = torch.finfo(out_dtype)
    return f.smallest_normal * f.eps / scale


def fp32_error(tol_class: TolClass, out_dtype: torch.dtype, cond_err: float = 0.0,
               scale: float = 1.0, terms=None) -> float:
    """What a computation in fp32 rounded once to `out_dtype` reaches on this case, whose
    outputs reach `scale` at most (each a sum of `terms` terms, where known)."""
    t = TOLERANCES[tol_class]
    return (t.round_ulps * (torch.finfo(out_dtype).eps + subnormal_spacing(out_dtype, scale))
            + t.fp32_part(t.fp32_ulps, terms) * EPS32 + COND_FACTOR * cond_err)


def weak_yardstick(tol_class: TolClass, out_dtype: torch.dtype, case_dtype: torch.dtype,
                   yardstick_err: float, cond_err: float = 0.0, scale: float = 1.0,
                   terms=None) -> bool:
    """The yardstick is worse than fp32 with one rounding: it must not set the bound. Only
    in 16-bit cases: a yardstick of an fp32 case computes in fp32 itself."""
    return (torch.finfo(case_dtype).eps > EPS32
            and yardstick_err > fp32_error(tol_class, out_dtype, cond_err, scale, terms))


def allowed_error(tol_class: TolClass, out_dtype: torch.dtype, case_dtype: torch.dtype,
                  yardstick_err: float, cond_err: float = 0.0,
                  from_yardstick: bool = False, scale: float = 1.0, terms=None) -> float:
    """The largest normalized error that passes (module docstring), the same for every
    implementation, the yardstick's own item included. `from_yardstick`: the bound the
    yardstick's own error would set even where it is weak (what the rule gave the
    yardstick's item by its name before; no item is judged by it now). `scale`:
    max|golden|. `terms`: the length of each element's sum, where the output declares it
    (OutputSpec.terms)."""
    t = TOLERANCES[tol_class]
    fp32 = fp32_error(tol_class, out_dtype, cond_err, scale, terms)
    weak = not from_yardstick and weak_yardstick(tol_class, out_dtype, case_dtype,
                                                 yardstick_err, cond_err, scale, terms)
    ref = fp32 if weak else yardstick_err
    floor = (t.floor_ulps * (torch.finfo(out_dtype).eps + subnormal_spacing(out_dtype, scale))
             + (t.fp32_part(t.floor_fp32_ulps, terms) if t.floor_fp32_ulps else 0.0) * EPS32)
    return min(t.k * ref + floor + COND_FACTOR * cond_err,
               ceiling(tol_class, out_dtype, case_dtype, cond_err, scale, terms))


def ceiling(tol_class: TolClass, out_dtype: torch.dtype, case_dtype: torch.dtype,
            cond_err: float = 0.0, scale: float = 1.0, terms=None) -> float:
    """The cap: the case dtype's ceiling, raised to what fp32 with one rounding reaches on
    the case where that is larger (no implementation is asked to beat correct fp32 code),
    and to two spacings of the output dtype's subnormal range."""
    return max(CEILINGS[case_dtype], fp32_error(tol_class, out_dtype, cond_err, scale, terms),
               SUBNORMAL_CEILING_ULPS * subnormal_spacing(out_dtype, scale))


# The per-step comparison of a training step with its float64 model (suite/step/): the
# quantities after t steps carry every earlier step's roundings, so the bound grows with t.
@dataclass(frozen=True)
class StepGrowth:
    per_step: float  # the floor and the ceiling after t steps: (1 + per_step (t - 1)) times
    reason: str


STEP_GROWTH = StepGrowth(
    per_step=1.0,
    reason="each step adds its own roundings to the trajectory, and the parameters it "
           "updates carry the earlier steps' errors into the next forward; with no "
           "contraction to rely on, t steps' errors add up to t times one step's (a random "
           "walk would give sqrt(t); linear holds without assuming independence), so the "
           "floor and the ceiling grow linearly with t. The yardstick's error at step t, the "
           "same loop in eager PyTorch, already carries its own growth: k times it is not "
           "grown again")


def step_growth(step: int) -> float:
    """How much the floor and the ceiling have grown after `step` steps (1 at the first)."""
    return 1.0 + STEP_GROWTH.per_step * (max(step, 1) - 1)


DEPTH_GROWTH_REASON = (
    "the ceiling is one op's; a model's gradient reaches its first block through every "
    "later block's rounded forward and backward, so a correct 16-bit model of L blocks is "
    "further from float64 than one op (measured on the H100: the eager bf16 step of 12 and "
    "24 blocks at 0.06-0.064 of max|golden|, over the bf16 ceiling 0.06). The ceiling, the "
    "backstop for a yardstick that is itself wrong, grows as sqrt(L), the random walk of L "
    "blocks' roundings; the bound proper stays 2 x the eager run's error")


def depth_growth(depth: int) -> float:
    """How much the step's ceiling grows for a model of `depth` blocks (1 for one)."""
    return math.sqrt(max(depth, 1))


def step_allowed(tol_class: TolClass, out_dtype: torch.dtype, case_dtype: torch.dtype,
                 yardstick_err: float, step: int, scale: float = 1.0,
                 cond_err: float = 0.0, depth: int = 1) -> float:
    """The largest normalized error of a training step's quantity (a loss, a gradient, a
    parameter, a moment) after `step` steps against the float64 model: k times the eager
    loop's error at that step plus the grown floor and COND_FACTOR times the conditioning,
    under the grown ceiling (never below what the conditioning allows). No weak-yardstick
    substitution (allowed_error's `fp32`): the eager loop's error is a whole step's
    roundings, which one rounding to the output dtype does not describe.

    cond_err: how far the float64 model's trajectory drifts by step t when every step's
    gradients move by the error the gradients' own check allows (suite/step/runner.py).
    Adam divides by sqrt(v): where a gradient is within that error of 0 its update changes
    sign, by up to 2 lr, whatever the implementation, and the next steps' forward and
    gradients move with it; as the ops' conditioning, it is what no implementation can
    beat. depth: the model's blocks (depth_growth, the ceiling's alone)."""
    t = TOLERANCES[tol_class]
    g = step_growth(step)
    floor = g * (t.floor_ulps * (torch.finfo(out_dtype).eps + subnormal_spacing(out_dtype, scale))
                 + t.floor_fp32_ulps * EPS32)
    return min(t.k * yardstick_err + floor + COND_FACTOR * cond_err,
               g * depth_growth(depth) * ceiling(tol_class, out_dtype, case_dtype, cond_err,
                                                 scale))


def describe(tol_class: TolClass, case_dtype: torch.dtype, terms=None) -> str:
    t = TOLERANCES[tol_class]
    fp32 = f" + {t.fp32_part(t.floor_fp32_ulps, terms):.3g} fp32 ulp" \
        if t.floor_fp32_ulps else ""
    return (f"{t.k:g} x min(yardstick, fp32 with one rounding) + {t.floor_ulps:g} ulp{fp32}"
            f" + {COND_FACTOR:g} x conditioning, ceiling {CEILINGS[case_dtype]:g} "
            f"(never below the fp32 bound)")
