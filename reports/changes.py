"""Regressions and improvements against the baseline run (suite.regression), as tables:
timing changes with their ratio and p-value, new and fixed failures, cases that
disappeared and new cases. Long lists are cut at MAX_LISTED with a count."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from reports import fmt
from suite.regression import Change, Comparison

MAX_LISTED = 300
FIRST_ROWS = 20  # rows shown open per listing; the rest fold


@dataclass(frozen=True)
class TimingRow:
    op: str
    case_id: str
    impl: str
    base: fmt.Num
    cur: fmt.Num
    ratio: fmt.Num
    p: fmt.Num
    n: str  # "baseline/current" sample counts


@dataclass(frozen=True)
class VerdictRow:
    op: str
    case_id: str
    impl: str
    before: str
    after: str
    reason: str


class Kind(enum.Enum):
    TIMING = "timing"  # rows are TimingRow
    VERDICT = "verdict"  # VerdictRow with before and after
    PRESENCE = "presence"  # VerdictRow with the verdict in the one run holding it


@dataclass(frozen=True)
class Listing:
    key: str  # css/anchor key
    title: str
    explain: str
    kind: Kind
    rows: tuple  # at most MAX_LISTED
    n_total: int

    @property
    def n_hidden(self) -> int:
        return self.n_total - len(self.rows)

    @property
    def first_rows(self) -> tuple:
        return self.rows[:FIRST_ROWS]

    @property
    def more_rows(self) -> tuple:
        return self.rows[FIRST_ROWS:]


@dataclass(frozen=True)
class Changes:
    rule: str
    n_common: fmt.Num
    n_timed: fmt.Num
    gate_failed: bool
    env_differences: tuple
    listings: tuple  # the non-empty ones
    empty: tuple  # titles of the empty ones


def _timing(items) -> tuple:
    return tuple(TimingRow(t.op, t.case_id, t.impl, fmt.seconds(t.base_median_s),
                           fmt.seconds(t.cur_median_s), fmt.times(t.ratio), fmt.pvalue(t.p),
                           f"{t.n_base}/{t.n_cur}") for t in items[:MAX_LISTED])


def _verdicts(items) -> tuple:
    return tuple(VerdictRow(v.op, v.case_id, v.impl, v.before or "", v.after,
                            v.reason or "") for v in items[:MAX_LISTED])


def _presence(items) -> tuple:
    return tuple(VerdictRow(p.op, p.case_id, p.impl, "", p.verdict, "")
                 for p in items[:MAX_LISTED])


def build(c: Comparison) -> Changes:
    def worst_first(change: Change, reverse: bool):
        return sorted((t for t in c.timing if t.change is change), key=lambda t: t.ratio,
                      reverse=reverse)

    regressions = worst_first(Change.REGRESSION, True)
    improvements = worst_first(Change.IMPROVEMENT, False)
    uncertain = sorted(c.uncertain, key=lambda t: abs(t.ratio - 1), reverse=True)
    listings = (
        Listing("regressions", "Regressions", "slower beyond the factor, significant",
                Kind.TIMING, _timing(regressions), len(regressions)),
        Listing("new-failures", "New failures",
                "fail or error now; passed, was unsupported or did not exist before",
                Kind.VERDICT, _verdicts(list(c.new_failures)), len(c.new_failures)),
        Listing("improvements", "Improvements", "faster beyond the factor, significant",
                Kind.TIMING, _timing(improvements), len(improvements)),
        Listing("fixed", "Fixed failures", "failed or raised before, pass now", Kind.VERDICT,
                _verdicts(list(c.fixed_failures)), len(c.fixed_failures)),
        Listing("uncertain", "Beyond the factor, not significant",
                "the medians differ by more than the factor but the samples do not show it "
                "at the chosen alpha (too few or too noisy samples)", Kind.TIMING,
                _timing(uncertain), len(uncertain)),
        Listing("disappeared", "Disappeared", "in the baseline only", Kind.PRESENCE,
                _presence(list(c.disappeared)), len(c.disappeared)),
        Listing("new-cases", "New cases", "in the current results only", Kind.PRESENCE,
                _presence(list(c.new_cases)), len(c.new_cases)),
    )
    return Changes(rule=c.rule.describe(), n_common=fmt.count(c.n_common),
                   n_timed=fmt.count(c.n_timed), gate_failed=c.gate_failed,
                   env_differences=c.env_differences,
                   listings=tuple(x for x in listings if x.n_total),
                   empty=tuple(x.title.lower() for x in listings if not x.n_total))
