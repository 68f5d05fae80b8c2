"""What one case's items share: its inputs in the case dtype and layout, the float64 golden of
those very values, how far the golden moves under one fp32 rounding of the inputs (the
conditioning), and the yardstick implementation's error. Built once per case (and only
when some implementation can run it), after checking that the device can hold it
(suite/memory.py); a case the device cannot hold, or whose exact result no output of its
dtype can hold, is refused (every item `unsupported`), and one whose inputs or golden fail
to build is the harness's error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Optional

import torch

from bwd_suite.suite import cuda_fault, memory, registry, tolerances, values
from bwd_suite.suite.calls import Call
from bwd_suite.suite.cases import Case
from bwd_suite.suite.inputs import DTYPES, generator, perturbed
from bwd_suite.suite.opspec import CaseInputs, OpSpec
from bwd_suite.suite.registry import Implementation
from bwd_suite.suite.timing import DEFAULT_WARMUP_S
from bwd_suite.suite.verdicts import flat, golden_scale, normalized_error


@dataclass(frozen=True)
class RunOptions:
    device: torch.device
    golden_device: torch.device
    repeats: int = 3  # calls on the same inputs for the determinism check (first included)
    timing: bool = True
    warmup: int = 3
    warmup_s: float = DEFAULT_WARMUP_S  # and on CUDA at least this long (suite/timing.py)
    samples: int = 20
    max_time_s: float = 1.0
    l2_flush: str = "clean"  # suite.timing.L2_FLUSH_MODES


def output_dtype(v) -> torch.dtype:
    """The dtype of an output, or of the first tensor of a list output."""
    return values.first(v).dtype


@dataclass
class CaseContext:
    """Everything about one case that every implementation shares."""

    spec: OpSpec
    case: Case
    opts: RunOptions
    inputs: CaseInputs = field(init=False)
    golden: dict = field(init=False)
    ref_errs: Optional[dict] = field(init=False, default=None)
    ref_failure: str = field(init=False, default="")
    # the yardstick's own outputs where it is weaker than the bound (suite/verdicts.py:
    # an item's output equal to one bit for bit is the weak-yardstick outcome)
    weak_yardstick_outputs: dict = field(init=False, default_factory=dict)
    # what the diagnosis of a failing item computed from the case alone (the golden's
    # terms and perturbations), for the next implementation failing it
    diagnosis_cache: dict = field(init=False, default_factory=dict)

    def __post_init__(self):
        p = self.case.params
        self.inputs = self.spec.make_inputs(p, self.case.seed, self.opts.device)
        # before the golden: a case the device cannot hold is the harness's limit
        short = memory.shortfall(memory.case_need(self.spec, self.inputs, p, self.opts.repeats),
                                 self.opts.device, self.opts.golden_device)
        if short:
            raise CaseRefused(f"case refused: {short}")
        # not kept: on a case of GPT-2 large's 774M parameters the float64 inputs alone are
        # 31 GB, and the conditioning's perturbed copy as much again
        self.golden = self.spec.golden(**self.float64_inputs(), **self.inputs.attrs)
        self.outputs = list(self.spec.outputs(p))
        self.cond_errs = self._conditioning()
        missing = {o.name for o in self.outputs} - set(self.golden)
        if missing:
            raise RuntimeError(f"golden of {self.spec.name} did not produce {sorted(missing)}")
        self.case_dtype = DTYPES[p[self.spec.dtype_param]]
        self._check_range()

    def _check_range(self) -> None:
        """Refuse a case whose exact result no output of its dtype can hold: every
        implementation would fail it, which says nothing about any of them."""
        empties = dict(self.spec.empty_outputs(self.inputs, self.case.params))
        empties.update({k: self.inputs.tensors[k] for k in self.spec.mutates})
        for o in self.outputs:
            dtype = output_dtype(empties[o.name])
            gold = flat(self.golden[o.name])
            top = gold.abs().max().item() if gold.numel() else 0
            if dtype.is_floating_point and top > torch.finfo(dtype).max:
                raise CaseRefused(f"case refused: the exact {o.name} reaches {top:.3g}, "
                                  f"beyond {str(dtype).removeprefix('torch.')}'s largest "
                                  f"value {torch.finfo(dtype).max:.6g}")

    def float64_inputs(self) -> dict:
        """The inputs as the golden sees them (floating ones in float64) on the golden
        device; made afresh on each call."""
        gd = self.opts.golden_device
        return {k: values.map_tensors(lambda t: t.to(gd, torch.float64) if t.is_floating_point()
                               else t.to(gd), v)
                for k, v in self.inputs.tensors.items()}

    def _conditioning(self) -> dict:
        """Movement of the golden under one fp32 rounding of every floating input, and
        its distance to the op's alternate golden (over COND_FACTOR), whichever is larger."""
        gen = generator(self.case.seed)
        eps = torch.finfo(torch.float32).eps
        gd = self.opts.golden_device
        # tensor by tensor from the case's inputs: never a second whole float64 copy
        moved = {k: values.map_tensors(lambda t: perturbed(t.to(gd, torch.float64), eps, gen)
                                if t.is_floating_point() else t.to(gd), v)
                 for k, v in self.inputs.tensors.items()}
        other = self.spec.golden(**moved, **self.inputs.attrs)
        errs = {o.name: normalized_error(other[o.name], self.golden[o.name])
                for o in self.outputs}
        del moved, other
        if self.spec.alternate_golden is not None:
            # a second legitimate truth: its distance widens the bound by itself
            alt = self.spec.alternate_golden(**self.float64_inputs(), **self.inputs.attrs)
            for o in self.outputs:
                if o.name in alt:
                    spread = normalized_error(alt[o.name], self.golden[o.name])
                    errs[o.name] = max(errs[o.name], spread / tolerances.COND_FACTOR)
        return errs

    def yardstick_note(self, outputs: Mapping[str, torch.Tensor]) -> Optional[str]:
        """Which outputs' bound came from fp32 with one rounding because the yardstick was
        worse (suite/tolerances.py), in words; None when none did."""
        if self.ref_errs is None:
            return None
        weak = []
        for o in self.outputs:
            ref, cond = self.ref_errs[o.name], self.cond_errs[o.name]
            dtype = output_dtype(outputs[o.name])
            scale = golden_scale(self.golden[o.name])
            if tolerances.weak_yardstick(o.tol_class, dtype, self.case_dtype, ref, cond, scale,
                                         o.terms):
                fp32 = tolerances.fp32_error(o.tol_class, dtype, cond, scale, o.terms)
                weak.append(f"{o.name} ({ref:.2g} > {fp32:.2g})")
        if not weak:
            return None
        return (f"yardstick {self.spec.yardstick} worse than fp32 with one rounding on "
                f"{', '.join(weak)}: those bounds use the fp32 error")

    def yardstick_errors(self, impls_by_name: Mapping[str, Implementation]) -> dict:
        if self.ref_errs is None:
            ys = impls_by_name.get(self.spec.yardstick) or next(
                i for i in registry.implementations(self.spec.name)
                if i.name == self.spec.yardstick)
            try:
                out = Call.of(self.spec, ys, self.inputs, self.case.params).checked().outputs
                self.ref_errs = {o.name: normalized_error(out[o.name], self.golden[o.name])
                                 for o in self.outputs}
                self.weak_yardstick_outputs = {
                    o.name: out[o.name] for o in self.outputs if tolerances.weak_yardstick(
                        o.tol_class, output_dtype(out[o.name]), self.case_dtype,
                        self.ref_errs[o.name], self.cond_errs[o.name],
                        golden_scale(self.golden[o.name]))}
            except Exception as e:  # noqa: BLE001 - recorded, and every item says so
                memory.note(e)
                self.ref_failure = f"yardstick {ys.name} raised {type(e).__name__}: {e}"
                self.ref_errs = {o.name: float("nan") for o in self.outputs}
        return self.ref_errs


class CaseRefused(Exception):
    """The case itself cannot be judged (its exact result does not fit its output dtype):
    every implementation's row is `unsupported` with the reason."""


@dataclass(frozen=True)
class Refused:
    reason: str


def case_context(spec: OpSpec, case: Case, opts: RunOptions) -> "CaseContext | Refused | str":
    """The case's shared context, a refusal of the case, or why the context could not be
    built (an error row's reason)."""
    try:
        return CaseContext(spec, case, opts)
    except CaseRefused as e:
        return Refused(str(e))
    except Exception as e:  # noqa: BLE001 - a broken input factory or golden is an error row
        cuda_fault.note(e, f"{case.id} (case setup)")
        memory.note(e)
        return (f"harness: the case's inputs or float64 golden could not be built: "
                f"{type(e).__name__}: {e}")


class ContextCache:
    """The last case's context (or its setup failure), for items of one case that arrive
    one at a time (pytest's); the previous case's tensors are freed first."""

    def __init__(self):
        self._key, self._value = None, None

    def get(self, spec: OpSpec, case: Case, opts: RunOptions) -> "CaseContext | Refused | str":
        key = (spec.name, case.id, case.file, opts)
        if key != self._key:
            self._key, self._value = None, None
            self._value, self._key = case_context(spec, case, opts), key
        return self._value
