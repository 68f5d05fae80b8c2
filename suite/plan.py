"""What a run will do: cases, each with the implementations to run on it.

A plan is data; suite/driver.py executes it. Every entry point builds one: `run` and
`list` from the command line's selection, the pytest plugin one item at a time, `mutants`
from the mutant zoo, scripts/kernel_variants.py from its variants.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Optional, Sequence

from bwd_suite.suite.cases import Case
from bwd_suite.suite.opspec import OpSpec
from bwd_suite.suite.registry import Implementation


@dataclass(frozen=True)
class CasePlan:
    """One case and the implementations to run on it, in order."""

    spec: OpSpec
    case: Case
    impls: tuple  # of Implementation

    def __post_init__(self):
        wrong = [i.name for i in self.impls if i.op != self.spec.name]
        if wrong or self.case.op != self.spec.name:
            raise ValueError(f"plan of {self.case.id}: implementations {wrong} or the case "
                             f"are not of op {self.spec.name}")


@dataclass(frozen=True)
class Plan:
    entries: tuple  # of CasePlan

    @property
    def n_items(self) -> int:
        return sum(len(e.impls) for e in self.entries)

    @property
    def n_cases(self) -> int:
        return len(self.entries)

    def __iter__(self) -> Iterator[CasePlan]:
        return iter(self.entries)

    def ops(self) -> list[str]:
        return sorted({e.spec.name for e in self.entries})

    @classmethod
    def of(cls, cases: Iterable[Case], impls_for_op: Callable[[str], Sequence[Implementation]],
           specs: Optional[dict] = None) -> "Plan":
        """Each case with the implementations `impls_for_op` gives for its op; cases of an
        op without implementations are left out. Cases keep their order."""
        from bwd_suite.suite import registry

        specs = specs if specs is not None else registry.ops()
        impls: dict[str, tuple] = {}
        entries = []
        for case in cases:
            if case.op not in impls:
                impls[case.op] = tuple(impls_for_op(case.op))
            if impls[case.op]:
                entries.append(CasePlan(specs[case.op], case, impls[case.op]))
        return cls(tuple(entries))

    @classmethod
    def single(cls, spec: OpSpec, case: Case, impl: Implementation) -> "Plan":
        return cls((CasePlan(spec, case, (impl,)),))
