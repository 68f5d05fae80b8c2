"""What an op declares to the diagnosis (`OpSpec.diagnosis`, a `DiagnosisSpec`): its
regions, reference terms, case features and causes. The rules it adds read an `Evidence`
(evidence.py); the generic causes any op may list are in generic.py."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence

import torch


@dataclass(frozen=True)
class Region:
    """A named set of elements of one output; `mask` broadcasts to the output's shape."""

    name: str  # family, then a qualifier: "tile_tail_64", "batch_1"
    doc: str  # words for the diagnosis: "the last 3 steps of each 64-step tile"
    mask: torch.Tensor


@dataclass(frozen=True)
class Term:
    """A reference tensor (same shape as the output) the error is compared with."""

    name: str  # family, then a qualifier: "tile_halo_64", "state_path"
    doc: str  # "the contribution of the K-1 gradients right of each 64-step tile"
    value: torch.Tensor


@dataclass(frozen=True)
class CauseSpec:
    cause: enum.Enum  # a member of the op's cause enum; its value is what rows store
    title: str  # the likely cause, in a few words
    check: str  # what to look at in the kernel
    # case features without which the bug cannot show (for the cross-case weighing)
    requires: Callable[[Mapping], bool] = field(default=lambda f: True)


@dataclass(frozen=True)
class Feature:
    name: str
    words: str  # "with SiLU": reads after "fails only" / "never fails"
    numeric: bool = False  # compared by rank correlation ("grows with"), not by presence
    # the features this one implies by its definition ("dropout" for "dropout and p > 0";
    # "not nonfinite" for "weight decay on a step that runs"): a claim about one of those
    # is not contrasted on this one, which it fixes (attribution.comparable)
    implies: tuple = ()



@dataclass(frozen=True)
class DiagnosisSpec:
    """What an op tells the diagnosis (the `OpSpec.diagnosis` hook)."""

    causes: tuple  # of CauseSpec
    rules: tuple  # of Rule
    features: tuple  # of Feature
    # params -> {feature name: value} for every Feature
    case_features: Callable[[Mapping], Mapping[str, Any]]
    # (params, float64 input tensors, output name, output shape) -> regions of that output
    regions: Callable[..., Sequence[Region]]
    # (params, float64 input tensors, attrs, Evidence so far: wrong outputs and locations,
    # no fits) -> {output: [Term]}; only terms the locations make worth testing
    terms: Callable[..., Mapping[str, Sequence[Term]]]
    # --- optional (added with the period search; older specs leave them out) ---
    # the nouns of each output's axes, for the words of the period search: a mapping
    # {output: ("batch", "channel", "step")} or (params, output) -> tuple; an output or
    # axis without one is "index along dim a"
    axes: Any = None
    # the tile and vector sizes the op's kernels use along an axis noun, e.g.
    # {"column": (8, 32)}: a remainder is named after one of them when it fits
    periods: Mapping[str, Sequence[int]] = field(default_factory=dict)
    # params -> {output: shape}, so that the run-level diagnosis knows the axis lengths of
    # passing items too ("fails only when the number of columns is not a multiple of 8")
    shapes: Optional[Callable[[Mapping], Mapping[str, tuple]]] = None
    # the golden's named terms and perturbations for the checked hypotheses: a
    # suite.diagnosis.hypotheses.Hypotheses (its causes and rules go in the tables above)
    hypotheses: Any = None

    def __post_init__(self):
        known = {c.cause for c in self.causes}
        for r in self.rules:
            if r.cause not in known:
                raise ValueError(f"rule for {r.cause} names no CauseSpec")

    def cause_spec(self, value: str) -> Optional[CauseSpec]:
        return next((c for c in self.causes if c.cause.value == value), None)

    def axis_nouns(self, params: Mapping, output: str, ndim: int) -> tuple:
        """One noun per axis of the output; None where the op names none."""
        names = self.axes(params, output) if callable(self.axes) else \
            (self.axes or {}).get(output)
        names = tuple(names or ())
        return tuple(names[a] if a < len(names) else None for a in range(ndim))

