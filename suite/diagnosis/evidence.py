"""What the rules see about one failing item (`Evidence`: the wrong outputs, the
locations, the term fits, the case features), the rules themselves, and which of an op's
rules hold (`candidates`). Built per item by localisation.py, rebuilt from stored rows by
attribution.py."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional

from bwd_suite.suite.diagnosis.axis_pattern import AXIS_PREFIX, AxisPattern
from bwd_suite.suite.diagnosis.measurements import Location, TermFit
from bwd_suite.suite.diagnosis.vocabulary import DiagnosisSpec

if TYPE_CHECKING:
    from bwd_suite.suite.rows import ResultRow

# A region holds the errors when it contains at least this share of the wrong elements;
# not 1.0, so that a few elements just beyond tolerance elsewhere do not hide a pattern.
CONCENTRATED = 0.9
# A region says something only if it is at most this share of the output.
SPECIFIC = 0.5
# Errors are "spread" only if no region leaving out a fifth of the output holds them.
LOCALISED = 0.8
# error = coef * term "exactly": coef within this of the expected value, and the residual
# (|error - coef*term| / |error|) at most EXACT_RESIDUAL; rounding noise of a 16-bit store
# is a few per cent of a planted error, never tens.
COEF_TOL = 0.1
EXACT_RESIDUAL = 0.15
# The term explains part of the error (a scaled or partial version of it).
PARTIAL_RESIDUAL = 0.9


@dataclass(frozen=True)
class Rule:
    """Evidence -> cause. All rules that hold name candidates, in table order."""

    cause: enum.Enum
    when: Callable[["Evidence"], bool]



# the kinds of the checked hypotheses' fits (hypotheses.py), stored beside the op's terms
# as "term:NAME", "attr:NAME", "index:..."
HYPOTHESIS_KINDS = ("term", "attr", "index")


def is_hypothesis(term: str) -> bool:
    return term.partition(":")[0] in HYPOTHESIS_KINDS


def _in_family(name: str, family: str) -> bool:
    return name == family or name.startswith(family + "_")



@dataclass(frozen=True)
class Evidence:
    """What the rules see about one failing item; rebuilt from a stored row as well."""

    wrong: frozenset  # output names beyond tolerance
    locations: tuple  # of Location
    fits: tuple  # of TermFit
    features: Mapping[str, Any]
    wrong_counts: Mapping[str, tuple] = field(default_factory=dict)  # output -> (n_bad, numel)
    # outputs holding unwritten (poison) or non-finite elements: no rounding story fits
    nonfinite: frozenset = frozenset()
    # the item's failure kind (suite.outcomes.FailureKind's value): "input modified",
    # "nondeterministic" say the cause themselves
    kind: Optional[str] = None
    # each wrong output's normalized error, max|impl - golden| / max|golden|
    errors: Mapping[str, float] = field(default_factory=dict)

    def f(self, name: str) -> Any:
        return self.features[name]

    def finite(self, output: str) -> bool:
        """The output is wrong by finite amounts only (nothing unwritten, no NaN or inf)."""
        return output in self.wrong and output not in self.nonfinite

    def only(self, *outputs: str) -> bool:
        """Something is wrong, and only among `outputs`."""
        return bool(self.wrong) and self.wrong <= set(outputs)

    def where(self, output: str) -> Optional[Location]:
        """The most specific region holding the output's errors, or None (spread)."""
        held = [lo for lo in self.locations if lo.output == output
                and not lo.region.startswith(AXIS_PREFIX)
                and lo.share >= CONCENTRATED and lo.coverage <= SPECIFIC]
        return min(held, key=lambda lo: lo.coverage) if held else None

    @cached_property
    def memo(self) -> dict:
        """Scratch space for rules that share work on one item (see `fallback`)."""
        return {}

    @cached_property
    def _patterns(self) -> tuple:
        # parsed once: every rule asks (a frozen dataclass still has a __dict__)
        found = [p for p in map(AxisPattern.from_location, self.locations) if p is not None]
        return tuple(sorted(found, key=lambda p: -p.score))

    def patterns(self, output: Optional[str] = None) -> list:
        """The period search's AxisPatterns (of one output, or of every wrong one), the
        most telling (highest score) first."""
        return [p for p in self._patterns
                if (p.output == output if output else p.output in self.wrong)]

    def along(self, output: str, axis) -> Optional[AxisPattern]:
        """The output's pattern along one axis (its noun, or its index), or None."""
        if output not in self.wrong:
            return None
        return next((p for p in self.patterns(output)
                     if (p.axis == axis if isinstance(axis, int) else p.noun == axis)), None)

    def located(self, output: str, family: str) -> bool:
        """The output is wrong and its most specific region is of this family."""
        lo = self.where(output) if output in self.wrong else None
        return lo is not None and _in_family(lo.region, family)

    def at(self, output: str, family: str, specific: bool = False) -> Optional[Location]:
        """A region of this family holds the output's errors (if `specific`, one of at
        most SPECIFIC of the output), even when a smaller region of another family does."""
        held = [lo for lo in self.locations if lo.output == output
                and _in_family(lo.region, family) and lo.share >= CONCENTRATED
                and (not specific or lo.coverage <= SPECIFIC)]
        return min(held, key=lambda lo: lo.coverage) if held else None

    def touches(self, output: str, family: str) -> bool:
        """Some wrong element of the output lies in a region of this family."""
        return any(lo.output == output and _in_family(lo.region, family) and lo.n_bad
                   for lo in self.locations)

    def fit(self, output: str, family: str) -> list[TermFit]:
        return [t for t in self.fits if t.output == output and _in_family(t.term, family)]

    def explains(self, output: str, family: str, coef: float) -> bool:
        """error = coef * term of this family, within rounding."""
        return any(abs(t.coef - coef) <= COEF_TOL and t.residual <= EXACT_RESIDUAL
                   for t in self.fit(output, family))

    def partly(self, output: str, family: str) -> bool:
        """A term of this family explains some of the error, but not as exactly -1 x."""
        return any(t.residual <= PARTIAL_RESIDUAL for t in self.fit(output, family)) \
            and not self.explains(output, family, -1.0)

    def loses(self, output: str, family: str) -> bool:
        """The error looks like (some of) this term missing: a negative coefficient."""
        return any(t.coef < -COEF_TOL and t.residual <= PARTIAL_RESIDUAL
                   for t in self.fit(output, family))

    def spread(self, output: str) -> bool:
        """Wrong with no region (of at most LOCALISED of it) holding the errors, neither
        one of the op's nor a pattern of the period search along any axis, and no term
        of the op's that explains much of it (the checked hypotheses name their own
        causes)."""
        return (output in self.wrong
                and not any(lo.output == output and lo.share >= CONCENTRATED
                            and lo.coverage <= LOCALISED for lo in self.locations)
                and not any(t.residual <= PARTIAL_RESIDUAL for t in self.fits
                            if t.output == output and not is_hypothesis(t.term)))

    @classmethod
    def from_row(cls, row: "ResultRow", spec: DiagnosisSpec) -> "Evidence":
        wrong, counts, nonfinite, errors = set(), {}, set(), {}
        for o in row.outputs or ():
            if output_wrong(o):
                wrong.add(o["name"])
                counts[o["name"]] = (int(o["n_bad"]), int(o["numel"]))
                errors[o["name"]] = float(o["err"])
                if o["n_unwritten"] or o["n_nonfinite"]:
                    nonfinite.add(o["name"])
        locs = tuple(Location(**lo) for lo in row.error_locations or ())
        fits = tuple(TermFit(**t) for t in row.error_terms or ())
        kind = row.failure_kind.value if row.failure_kind is not None else None
        return cls(frozenset(wrong), locs, fits, spec.case_features(row.params), counts,
                   frozenset(nonfinite), kind, errors)


def output_wrong(o: Mapping) -> bool:
    return bool(o["n_unwritten"] or o["n_nonfinite"] or o["err"] > o["allowed"])


def candidates(spec: DiagnosisSpec, ev: Evidence) -> tuple:
    """Cause values whose rules hold, in table order, each once."""
    seen = []
    for r in spec.rules:
        if r.cause.value not in seen and r.when(ev):
            seen.append(r.cause.value)
    return tuple(seen)

