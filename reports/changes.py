"""Regressions and improvements against the baseline run (suite.regression), as tables:
timing changes with their ratio and p-value, new failures, failing new cases, unexpected
passes, fixed failures, known failures (expected), cases that disappeared and new cases,
and the full table of ratios (every compared item, flagged ones on top). Long lists are
cut at MAX_LISTED (the ratios at MAX_RATIOS) with a count."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from bwd_suite.reports import fmt
from bwd_suite.suite.regression import Change, Comparison

MAX_LISTED = 300
MAX_RATIOS = 2000  # rows of the full table of ratios (--format json holds them all)
FIRST_ROWS = 20  # rows shown open per listing; the rest fold
FLAG_TEXT = {Change.REGRESSION: "regression", Change.IMPROVEMENT: "improvement",
             Change.UNCERTAIN: "beyond the factor, not significant", Change.UNCHANGED: ""}


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
    change: str = ""  # suite.regression.Change value
    flag: str = ""  # FLAG_TEXT: "" when within the factor
    # a compute-bound item's TFLOP/s and fraction of the compute peak in each run
    # (missing where it is not compute bound there, or the run predates the columns)
    base_tflops: fmt.Num = fmt.NONE
    cur_tflops: fmt.Num = fmt.NONE
    cur_frac_peak: fmt.Num = fmt.NONE


@dataclass(frozen=True)
class VerdictRow:
    op: str
    case_id: str
    impl: str
    before: str
    after: str
    reason: str
    declared: str = ""  # the known_failure of a known item
    rerun: str = ""  # the command that reruns a failing or declared item alone


class Kind(enum.Enum):
    TIMING = "timing"  # rows are TimingRow
    VERDICT = "verdict"  # VerdictRow with before and after
    PRESENCE = "presence"  # VerdictRow with the verdict in the one run holding it
    KNOWN = "known"  # VerdictRow of a declared known failure, with its declaration
    RATIOS = "ratios"  # TimingRow of every compared item, with its flag


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
    vacuous: str = ""  # why no timed item could be compared ("" when some were)
    n_known: int = 0  # known failures (expected)
    n_unexpected_passes: int = 0
    ratios: object = None  # Listing of every compared item (None when none was)

    @property
    def tone(self) -> str:
        """The banner: "bad" when the gate failed, "warn" when nothing was timed against
        the baseline, else "ok"."""
        return "bad" if self.gate_failed else ("warn" if self.vacuous else "ok")


def _timing(items, cap: int = MAX_LISTED, rates: tuple = ({}, {})) -> tuple:
    """`rates`: (baseline, current) items.compute_rates."""
    out = []
    for t in items[:cap]:
        key = (t.op, t.case_id, t.impl)
        base, cur = rates[0].get(key), rates[1].get(key)
        out.append(TimingRow(t.op, t.case_id, t.impl, fmt.seconds(t.base_median_s),
                             fmt.seconds(t.cur_median_s), fmt.times(t.ratio), fmt.pvalue(t.p),
                             f"{t.n_base}/{t.n_cur}", t.change.value, FLAG_TEXT[t.change],
                             base_tflops=fmt.rate(base.tflops if base else None),
                             cur_tflops=fmt.rate(cur.tflops if cur else None),
                             cur_frac_peak=fmt.percent(cur.frac_peak if cur else None)))
    return tuple(out)


def _known(items) -> tuple:
    return tuple(VerdictRow(k.op, k.case_id, k.impl, k.before or "", k.verdict,
                            k.reason or "", k.known_failure, k.rerun)
                 for k in items[:MAX_LISTED])


def _verdicts(items) -> tuple:
    return tuple(VerdictRow(v.op, v.case_id, v.impl, v.before or "", v.after,
                            v.reason or "", rerun=v.rerun) for v in items[:MAX_LISTED])


def _presence(items) -> tuple:
    return tuple(VerdictRow(p.op, p.case_id, p.impl, "", p.verdict, "")
                 for p in items[:MAX_LISTED])


def build(c: Comparison, rates: tuple = ({}, {})) -> Changes:
    """`rates`: (baseline, current) throughput of compute-bound items
    (reports.items.compute_rates), shown beside their medians."""
    def worst_first(change: Change, reverse: bool):
        return sorted((t for t in c.timing if t.change is change), key=lambda t: t.ratio,
                      reverse=reverse)

    regressions = worst_first(Change.REGRESSION, True)
    improvements = worst_first(Change.IMPROVEMENT, False)
    uncertain = sorted(c.uncertain, key=lambda t: abs(t.ratio - 1), reverse=True)
    listings = (
        Listing("regressions", "Regressions", "slower beyond the factor, significant",
                Kind.TIMING, _timing(regressions, rates=rates), len(regressions)),
        Listing("new-failures", "New failures",
                "cases in both runs that fail, raise or time out now and passed or were "
                "unsupported before (or failed as declared); not a declared known failure",
                Kind.VERDICT, _verdicts(list(c.new_failures)), len(c.new_failures)),
        Listing("failing-new-cases", "Failing new cases",
                "cases absent from the baseline that fail, raise or time out; not a "
                "declared known failure", Kind.VERDICT, _verdicts(list(c.failing_new_cases)),
                len(c.failing_new_cases)),
        Listing("unexpected-passes", "Unexpected passes",
                "declared known failures that pass: the declaration is out of date "
                "(pytest's strict xfail)", Kind.KNOWN, _known(list(c.unexpected_passes)),
                len(c.unexpected_passes)),
        Listing("improvements", "Improvements", "faster beyond the factor, significant",
                Kind.TIMING, _timing(improvements, rates=rates), len(improvements)),
        Listing("fixed", "Fixed failures", "failed or raised before, pass now", Kind.VERDICT,
                _verdicts(list(c.fixed_failures)), len(c.fixed_failures)),
        Listing("known-failures", "Known failures (expected)",
                "fail now as their implementation declares (known_failure): expected, not "
                "new failures", Kind.KNOWN, _known(list(c.known_failures)),
                len(c.known_failures)),
        Listing("uncertain", "Beyond the factor, not significant",
                "the medians differ by more than the factor but the samples do not show it "
                "at the chosen alpha (too few or too noisy samples)", Kind.TIMING,
                _timing(uncertain, rates=rates), len(uncertain)),
        Listing("disappeared", "Disappeared", "in the baseline only", Kind.PRESENCE,
                _presence(list(c.disappeared)), len(c.disappeared)),
        Listing("new-cases", "New cases", "in the current results only", Kind.PRESENCE,
                _presence(list(c.new_cases)), len(c.new_cases)),
    )
    ratios = Listing("ratios", "Every compared timing",
                     "each item timed in both runs on the same device after the same L2 flush: "
                     "baseline and current median, their ratio (above ×1 is slower), the "
                     "Mann-Whitney p, and whether the rule flags it; flagged items first, "
                     "then by distance from ×1", Kind.RATIOS,
                     _timing(list(c.compared), MAX_RATIOS, rates), len(c.compared)) \
        if c.compared else None
    return Changes(rule=c.rule.describe(), n_common=fmt.count(c.n_common),
                   n_timed=fmt.count(c.n_timed), gate_failed=c.gate_failed,
                   env_differences=c.env_differences,
                   listings=tuple(x for x in listings if x.n_total),
                   empty=tuple(x.title.lower() for x in listings if not x.n_total),
                   vacuous=c.vacuous_reason or "", n_known=len(c.known_failures),
                   n_unexpected_passes=len(c.unexpected_passes), ratios=ratios)
