"""Judging a run's step: every loss, gradient, parameter and moment against the float64 model
under the grown bound (tolerances.step_allowed, the eager run's error at the same step as
the yardstick), bitwise against another run, or its state unchanged by a skipped step.

Each tensor is judged on its own (a small LayerNorm bias is not hidden behind a large
embedding's scale); a quantity at a step is reported by its worst tensor (largest error
over bound), with the counts of the whole quantity.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Mapping, Optional

import torch

from bwd_suite.suite import tolerances, verdicts
from bwd_suite.suite.opspec import OutputSpec, TolClass
from bwd_suite.suite.outcomes import FailureKind
from bwd_suite.suite.step.loop import StepRecord

QUANTITIES = ("loss", "grads", "params", "exp_avg", "exp_avg_sq")
# the loss and the gradients are sums over the batch's tokens; parameters and moments are
# each an element's short formula of its gradient
TOL_CLASS = {"loss": TolClass.REDUCTION, "grads": TolClass.REDUCTION,
             "params": TolClass.ELEMENTWISE, "exp_avg": TolClass.ELEMENTWISE,
             "exp_avg_sq": TolClass.ELEMENTWISE}


@dataclass(frozen=True)
class Judged:
    """One quantity at one step: its worst tensor's check and the whole quantity's counts."""

    step: int
    quantity: str
    tensor: str  # the worst tensor's name
    check: verdicts.OutputCheck
    numel: int
    n_bad: int
    n_nonfinite: int
    failed: int  # tensors that failed
    failure: Optional[FailureKind]
    message: str

    def as_row(self) -> dict:
        row = self.check.as_row()
        row.update(name=f"step{self.step}.{self.quantity}", numel=self.numel,
                   n_bad=self.n_bad, n_nonfinite=self.n_nonfinite,
                   worst_index=f"{self.tensor}{self.check.worst_index}")
        return row


def _out_dtype(quantity: str, t: torch.Tensor) -> torch.dtype:
    """The dtype a quantity is computed in: the loss in fp32 (the cross entropy's), the
    others as stored."""
    if quantity == "loss" and t.dtype == torch.float64:
        return torch.float32
    return t.dtype


def _worst(step: int, quantity: str, checks: Mapping[str, verdicts.OutputCheck]) -> Judged:
    def ratio(c):
        return math.inf if c.failure else (c.err / c.allowed if c.allowed > 0
                                           else (math.inf if c.err > 0 else 0.0))

    name, worst = max(checks.items(), key=lambda kv: ratio(kv[1]))
    failed = [c for c in checks.values() if c.failure]
    message = ""
    if worst.failure:
        message = (f"step {step}, {quantity} {name}: {worst.message}"
                   + (f" (and {len(failed) - 1} more tensors)" if len(failed) > 1 else ""))
    return Judged(step, quantity, name, worst, sum(c.numel for c in checks.values()),
                  sum(c.n_bad for c in checks.values()),
                  sum(c.n_nonfinite for c in checks.values()), len(failed),
                  worst.failure, message)


def _message(c: verdicts.OutputCheck, step: int, depth: int) -> verdicts.OutputCheck:
    """A mismatch worded by the step rule (check_output words the op rule)."""
    if c.failure is not FailureKind.MISMATCH:
        return c
    g = tolerances.step_growth(step)
    d = tolerances.depth_growth(depth)
    text = (f"error {c.err:.3g} of max|golden| {c.scale:.3g} at {c.worst_index} > allowed "
            f"{c.allowed:.3g} (2 x the eager run's {c.ref_err:.3g} + floor x{g:g} + 8 x "
            f"conditioning {c.cond_err:.3g}, ceiling x{g * d:.3g}); {c.n_bad} of "
            f"{c.numel} elements beyond")
    return dataclasses.replace(c, message=text)


def errors(rec: StepRecord, golden: StepRecord, quantities=QUANTITIES) -> dict:
    """{(quantity, tensor): normalized error} of a run (the eager yardstick) at a step."""
    return {(q, n): verdicts.normalized_error(t, golden.quantity(q)[n])
            for q in quantities for n, t in rec.quantity(q).items()}


def against_float64(rec: StepRecord, golden: StepRecord, ref: Mapping, case_dtype,
                    quantities=QUANTITIES, cond: Mapping = {}, depth: int = 1) -> list[Judged]:
    """Each quantity of `rec` against the float64 model's at the same step, every tensor
    under tolerances.step_allowed with the yardstick's error `ref[(quantity, tensor)]`, the
    conditioning `cond[(quantity, tensor)]` (an absolute deviation) and the model's depth
    (its blocks)."""
    out = []
    for q in quantities:
        checks = {}
        for name, actual in rec.quantity(q).items():
            gold = golden.quantity(q)[name]
            ref_err = ref.get((q, name), 0.0)
            if not math.isfinite(ref_err):
                ref_err = 0.0  # a yardstick gone non-finite must not excuse anything
            scale = verdicts.golden_scale(gold)
            cond_err = cond.get((q, name), 0.0) / scale
            allowed = tolerances.step_allowed(TOL_CLASS[q], _out_dtype(q, actual), case_dtype,
                                              ref_err, rec.step, scale, cond_err, depth)
            checks[name] = _message(verdicts.check_output(
                OutputSpec(name, TOL_CLASS[q]), actual.reshape(gold.shape), gold, ref_err,
                case_dtype, cond_err, allowed=allowed), rec.step, depth)
        out.append(_worst(rec.step, q, checks))
    return out


def _index(flat: int, shape) -> str:
    """"[i, j]" of a flat index (the form check_output's worst_index takes)."""
    if not len(shape):
        return "[]"
    return "[" + ", ".join(str(int(i)) for i in torch.unravel_index(torch.tensor(flat),
                                                                     tuple(shape))) + "]"


def _bitwise_check(name: str, q: str, a: torch.Tensor, b: torch.Tensor,
                   what: str) -> verdicts.OutputCheck:
    scale = verdicts.golden_scale(b)
    nonfinite = int((~torch.isfinite(a)).sum())
    if verdicts.bitwise_equal(a, b):
        return verdicts.OutputCheck(name, TOL_CLASS[q].value, a.numel(), scale, 0.0, 0.0, 0.0,
                                    0.0, 0.0, 0.0, 0.0, 0, nonfinite, 0, "[]", None, "")
    x, y = a.double().reshape(-1), b.double().reshape(-1)
    differs = ~((x == y) | (x.isnan() & y.isnan()))
    diff = torch.where(differs, (x - y).abs().nan_to_num(nan=math.inf), torch.zeros_like(x))
    i = int(diff.argmax())
    n_bad = int(differs.sum())
    err = float(diff[i]) / scale
    return verdicts.OutputCheck(
        name, TOL_CLASS[q].value, a.numel(), scale, err, 0.0, 0.0, 0.0, float(diff[i]),
        float(diff[i]) / max(abs(float(y[i])), 1e-3 * scale), 0.0, n_bad, nonfinite, 0,
        _index(i, a.shape), FailureKind.MISMATCH,
        f"not bitwise equal to {what}: {n_bad} of {a.numel()} elements differ, by up to "
        f"{err:.3g} of max|value|")


def bitwise(rec: StepRecord, base: StepRecord, what: str = "the plain run",
            quantities=QUANTITIES) -> list[Judged]:
    out = []
    for q in quantities:
        checks = {n: _bitwise_check(n, q, t, base.quantity(q)[n], what)
                  for n, t in rec.quantity(q).items()}
        out.append(_worst(rec.step, q, checks))
    return out


def unchanged(rec: StepRecord) -> list[Judged]:
    """The skipped step's state after the optimizer bitwise equal to before it, and the
    inf reported: one Judged per state list (params, master, exp_avg, exp_avg_sq)."""
    out = []
    for kind, after in rec.state.items():
        checks = {n: _bitwise_check(n, "params", t, rec.before[kind][n],
                                    "its value before the skipped step")
                  for n, t in after.items()}
        out.append(_worst(rec.step, kind, checks))
    if not rec.found_inf:
        first = out[0]
        out[0] = Judged(first.step, first.quantity, first.tensor, first.check, first.numel,
                        first.n_bad, first.n_nonfinite, first.failed, FailureKind.MISMATCH,
                        f"step {rec.step}: the optimizer did not report the overflowed "
                        f"gradient (found_inf 0)" + (f"; {first.message}" if first.message
                                                     else ""))
    return out
