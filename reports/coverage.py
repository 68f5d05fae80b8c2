"""Coverage: per implementation, the parameter values it ran (pass or fail) against those
the cases offered, and the value pairs it is missing: pairs of values it runs that no case
combined although a valid case it supports could ("never exercised together"), offered
pairs it declared unsupported, and offered pairs it did not run otherwise.

The numbers come from `suite.coverage` (the same as `python -m bwd_suite coverage`), computed
from every row of the results; the page lists a capped part of them and says how many
are left out, so that a big run's page stays small.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import pandas as pd

from bwd_suite.reports import fmt
from bwd_suite.suite import coverage as cov

MAX_PAIRS = 10  # missing pairs listed per implementation and category
MAX_VALUES = 12  # values not run listed per parameter
MAX_REASONS = 3  # unsupported reasons listed per implementation

TITLES = {cov.NEVER_TOGETHER: "never exercised together",
          cov.UNSUPPORTED_PAIR: "offered, declared unsupported, though it runs each value",
          cov.NOT_RUN: "offered, not run (error, timeout or no item), though it runs each "
                       "value"}


@dataclass(frozen=True)
class ParamRow:
    param: str
    kind: str
    n_ran: fmt.Num
    n_offered: fmt.Num
    missing: tuple  # (values, why) groups, at most MAX_VALUES values in all
    n_hidden: int  # values not run that are not listed


@dataclass(frozen=True)
class PairRow:
    a_feature: str
    a: str
    b_feature: str
    b: str
    n_items: fmt.Num
    note: str


@dataclass(frozen=True)
class Listing:
    category: str
    title: str
    rows: tuple  # PairRow, at most MAX_PAIRS
    n_total: int

    @property
    def n_hidden(self) -> int:
        return self.n_total - len(self.rows)


@dataclass(frozen=True)
class Impl:
    op: str
    impl: str
    impl_kind: str
    anchor: str
    n_items: fmt.Num
    n_ran: fmt.Num
    n_unsupported: fmt.Num
    n_other: fmt.Num  # error, timeout
    unsupported: tuple  # (reason, n), the first MAX_REASONS
    n_params: int
    full_params: tuple  # names of the parameters that ran every offered value
    params: tuple  # ParamRow of the others
    counts: cov.PairCounts
    listings: tuple  # Listing per category with pairs
    checked: str

    @property
    def n_gaps(self) -> int:
        return self.counts.never_together

    @property
    def complete(self) -> bool:
        return not self.params and not self.listings


@dataclass(frozen=True)
class Coverage:
    impls: tuple  # Impl, by op and implementation
    binned: tuple  # (op, param, n values, how) of the parameters binned for the pairs
    n_with_gaps: int  # implementations with pairs never exercised together
    max_pairs: int
    max_values: int


def _missing(p: cov.ParamCoverage) -> tuple:
    groups: dict = {}
    for m in p.missing:
        groups.setdefault((m.why, m.reason), []).append(m.value)
    out, left = [], MAX_VALUES
    for (why, reason), values in groups.items():
        if left <= 0:
            break
        out.append((", ".join(values[:left]), f"{why}: {reason}" if reason else why))
        left -= len(values[:left])
    return tuple(out), max(0, len(p.missing) - MAX_VALUES)


def _impl(c: cov.ImplCoverage, k: int) -> Impl:
    verdicts = dict(c.verdicts)
    n_uns = verdicts.get(cov.UNSUPPORTED, 0)
    listings = []
    for category in cov.CATEGORY_ORDER:
        found = [g for g in c.missing_pairs if g.category == category]
        if found:
            listings.append(Listing(category, TITLES[category], tuple(
                PairRow(g.a_feature, g.a, g.b_feature, g.b, fmt.count(g.n_items), g.note)
                for g in found[:MAX_PAIRS]), len(found)))
    params = []
    for p in c.params:
        if p.missing:
            missing, hidden = _missing(p)
            params.append(ParamRow(p.param, p.kind, fmt.count(len(p.ran)),
                                   fmt.count(len(p.offered)), missing, hidden))
    return Impl(
        op=c.op, impl=c.impl, impl_kind=c.impl_kind, anchor=f"coverage-{k}",
        n_items=fmt.count(c.n_items), n_ran=fmt.count(c.n_ran), n_unsupported=fmt.count(n_uns),
        n_other=fmt.count(c.n_items - c.n_ran - n_uns),
        unsupported=tuple(c.unsupported_reasons[:MAX_REASONS]), n_params=len(c.params),
        full_params=tuple(p.param for p in c.params if p.complete), params=tuple(params),
        counts=c.pairs, listings=tuple(listings), checked=c.checked)


def build(df: Optional[pd.DataFrame], registry=None) -> Coverage:
    """The section from a results frame (every row; the latest run's where several hold
    one item)."""
    result = cov.compute(df, registry=registry)
    impls = tuple(_impl(c, k) for k, c in enumerate(result.impls))
    binned = tuple((b.op, b.param, b.n_offered, b.how) for b in result.binning
                   if b.how != "exact")
    return Coverage(impls=impls, binned=binned,
                    n_with_gaps=sum(1 for i in impls if i.n_gaps),
                    max_pairs=MAX_PAIRS, max_values=MAX_VALUES)
