"""What changed between a baseline run and a current run.

Per (op, case_id, impl) present in both: the ratio of median times and a two-sided
Mann-Whitney U test on the kept samples. As in asv's `compare`, a change is flagged only
when both agree: ratio > factor (default 1.10) and p < alpha (default 0.01) is a
regression, ratio < 1/factor and p < alpha an improvement; beyond the factor but not
significant is `uncertain` (asv's "~"). Verdict changes and cases present in one run only
are listed separately. Timings taken after different kinds of L2 flush (`l2_flush`) are
not compared: the flush alone moves them (docs/timing.md#l2-flush). Pure Python and
pandas: no torch import (2 s), no scipy.
"""

from __future__ import annotations

import enum
import math
from bisect import bisect_left, bisect_right
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional, Sequence

import pandas as pd

KEY = ["op", "case_id", "impl"]
from suite.outcomes import BAD_VERDICTS, Verdict
# exact null distribution of U up to this n1*n2 (cached per size pair), else normal
EXACT_MAX_CELLS = 2500
# run-level columns whose difference makes timings suspect (not the host: CI runners change)
ENV_COLUMNS = ("device_name", "driver", "torch_version", "cuda_version", "l2_flush",
               "timing_pacing")


# -- Mann-Whitney U ----------------------------------------------------------------------

@dataclass(frozen=True)
class MannWhitney:
    u: float  # U of the first sample: pairs (a, b) with a > b, ties count 1/2
    p: float  # two-sided
    exact: bool  # exact null distribution (no ties, small samples) or normal approximation


@lru_cache(maxsize=512)
def _u_counts(m: int, n: int) -> tuple:
    """Number of orderings of m + n distinct values giving each U = 0..m*n: the
    coefficients of the Gaussian binomial [m+n choose m]_q = prod (1-q^(n+i))/(1-q^i)."""
    size = m * n + 1
    c = [0] * size
    c[0] = 1
    for i in range(1, m + 1):
        s = n + i
        for k in range(size - 1, s - 1, -1):  # times (1 - q^s)
            c[k] -= c[k - s]
        for k in range(i, size):  # divided by (1 - q^i), a power series: exact mod q^size
            c[k] += c[k - i]
    return tuple(c)


def mann_whitney_u(a: Sequence[float], b: Sequence[float],
                   exact: Optional[bool] = None) -> MannWhitney:
    """Two-sided Mann-Whitney U test of samples a and b, like scipy's `mannwhitneyu`:
    the exact null distribution when there are no ties and the samples are small (or
    `exact=True`), else the tie-corrected normal approximation with continuity correction
    (or `exact=False`)."""
    a, b = [float(x) for x in a], [float(x) for x in b]
    n1, n2 = len(a), len(b)
    if not n1 or not n2:
        raise ValueError("Mann-Whitney U needs at least one value in each sample")
    # U = pairs with x > y plus half the ties: (#b < x + #b <= x) / 2 summed over a
    b_sorted = sorted(b)
    u = sum(bisect_left(b_sorted, x) + bisect_right(b_sorted, x) for x in a) / 2
    ties = [t for t in Counter(a + b).values() if t > 1]  # sizes of tied groups
    if exact is None:
        exact = not ties and n1 * n2 <= EXACT_MAX_CELLS
    elif exact and ties:
        raise ValueError("the exact distribution of U assumes no ties")
    if exact:
        counts = _u_counts(n1, n2)
        total = sum(counts)
        k = int(round(u))
        tail = min(sum(counts[:k + 1]), sum(counts[k:]))
        return MannWhitney(u=u, p=min(1.0, 2 * tail / total), exact=True)
    n = n1 + n2
    tie_term = sum(t ** 3 - t for t in ties) / (n * (n - 1))
    var = n1 * n2 / 12 * ((n + 1) - tie_term)
    if var <= 0:  # every value equal: no evidence of a difference
        return MannWhitney(u=u, p=1.0, exact=False)
    z = (abs(u - n1 * n2 / 2) - 0.5) / math.sqrt(var)
    return MannWhitney(u=u, p=min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2))), exact=False)


# -- the rule ------------------------------------------------------------------------------

class Change(enum.Enum):
    REGRESSION = "regression"  # slower than the factor and significant
    IMPROVEMENT = "improvement"  # faster than 1/factor and significant
    UNCERTAIN = "uncertain"  # beyond the factor either way, but p >= alpha
    UNCHANGED = "unchanged"


@dataclass(frozen=True)
class Rule:
    factor: float = 1.10
    alpha: float = 0.01

    def __post_init__(self):
        if not self.factor >= 1.0:
            raise ValueError(f"factor must be at least 1, got {self.factor}")
        if not 0.0 < self.alpha <= 1.0:
            raise ValueError(f"alpha must be in (0, 1], got {self.alpha}")

    def describe(self) -> str:
        return (f"flagged when the ratio of medians passes x{self.factor:g} "
                f"(or 1/{self.factor:g}) and a two-sided Mann-Whitney U test gives "
                f"p < {self.alpha:g}")

    def beyond(self, ratio):
        """Whether a ratio of medians passes the factor either way (a float or a Series)."""
        return (ratio > self.factor) | (ratio < 1 / self.factor)

    def classify(self, ratio: float, p: Optional[float]) -> Change:
        if not self.beyond(ratio):
            return Change.UNCHANGED
        if p is None or p >= self.alpha:
            return Change.UNCERTAIN
        return Change.REGRESSION if ratio > 1 else Change.IMPROVEMENT


@dataclass(frozen=True)
class TimingChange:
    op: str
    case_id: str
    impl: str
    case_group: str
    base_median_s: float
    cur_median_s: float
    ratio: float  # current / baseline median: above 1 is slower
    p: float
    n_base: int
    n_cur: int
    change: Change


@dataclass(frozen=True)
class VerdictChange:
    op: str
    case_id: str
    impl: str
    case_group: str
    before: Optional[str]  # None: the case is new in the current run
    after: str
    reason: str  # the current reason (a new failure) or the baseline's (a fixed one)


@dataclass(frozen=True)
class Presence:
    """An item present in one run only."""

    op: str
    case_id: str
    impl: str
    case_group: str
    verdict: str


@dataclass(frozen=True)
class Comparison:
    rule: Rule
    n_common: int  # items in both runs
    n_timed: int  # of those, timed in both after the same kind of L2 flush (compared)
    timing: tuple  # TimingChange beyond the factor (regression, improvement, uncertain)
    new_failures: tuple  # VerdictChange: fail/error now, not before (new cases included)
    fixed_failures: tuple  # VerdictChange: fail/error before, pass now
    disappeared: tuple  # Presence in the baseline only
    new_cases: tuple  # Presence in the current run only
    env_differences: tuple  # "device_name: A -> B"
    n_flush_differs: int = 0  # timed in both, after different L2 flushes: not compared

    def _of(self, change: Change) -> list:
        return [t for t in self.timing if t.change is change]

    @property
    def regressions(self) -> list:
        return self._of(Change.REGRESSION)

    @property
    def improvements(self) -> list:
        return self._of(Change.IMPROVEMENT)

    @property
    def uncertain(self) -> list:
        return self._of(Change.UNCERTAIN)

    @property
    def overlaps(self) -> bool:
        return self.n_common > 0

    @property
    def gate_failed(self) -> bool:
        """What CI gates on: a significant slowdown or a new failure."""
        return bool(self.regressions or self.new_failures)


def latest_rows(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (op, case_id, impl): the one of the latest run where several runs
    hold the same item (a folder of nightly files, say)."""
    if not df.duplicated(KEY).any():
        return df.reset_index(drop=True)
    order = df.sort_values("run_started", kind="stable")
    return order.drop_duplicates(KEY, keep="last").sort_index().reset_index(drop=True)


def kept_samples(value) -> list:
    """The kept samples of a row's time_samples_s (an array, or None / NaN without
    timing)."""
    if value is None or isinstance(value, float):
        return []
    return [float(x) for x in value]


def _n_samples(value) -> int:
    return 0 if value is None or isinstance(value, float) else len(value)


def _median(recorded, samples) -> Optional[float]:
    """The recorded median, or the samples' where it is missing."""
    if recorded is not None and not pd.isna(recorded) and recorded > 0:
        return float(recorded)
    s = sorted(kept_samples(samples))
    if not s:
        return None
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def _same_flush(common: pd.DataFrame) -> pd.Series:
    """Whether each item's two timings followed the same kind of L2 flush (missing on
    both sides counts as the same)."""
    cur, base = common["l2_flush"], common["l2_flush_b"]
    return (cur == base) | (cur.isna() & base.isna())


def _timed(common: pd.DataFrame) -> pd.DataFrame:
    """Items with samples in both runs, with their medians and ratio (vectorized: a
    nightly run holds tens of thousands of items)."""
    n_cur = common["time_samples_s"].map(_n_samples)
    n_base = common["time_samples_s_b"].map(_n_samples)
    t = common[(n_cur > 0) & (n_base > 0)]
    t = t.assign(m_cur=list(map(_median, t["time_median_s"], t["time_samples_s"])),
                 m_base=list(map(_median, t["time_median_s_b"], t["time_samples_s_b"])))
    t = t[(t["m_cur"] > 0) & (t["m_base"] > 0)]
    return t.assign(ratio=t["m_cur"] / t["m_base"])


def _env_differences(base: pd.DataFrame, cur: pd.DataFrame) -> tuple:
    out = []
    for col in ENV_COLUMNS:
        if col in base and col in cur:
            b, c = sorted(map(str, base[col].dropna().unique())), \
                sorted(map(str, cur[col].dropna().unique()))
            if b != c:
                out.append(f"{col}: {', '.join(b) or '-'} -> {', '.join(c) or '-'}")
    return tuple(out)


def _plain(df: pd.DataFrame) -> pd.DataFrame:
    """Python strings instead of pandas' arrow-backed ones, ~20x faster row by row."""
    return df.astype({c: object for c in df.columns
                      if pd.api.types.is_string_dtype(df[c].dtype)})


def _only(df: pd.DataFrame, other: pd.DataFrame) -> pd.DataFrame:
    """Rows of df whose item is not in other."""
    m = df.merge(other[KEY], on=KEY, how="left", indicator=True)
    return m[m["_merge"] == "left_only"]


def _presence(df: pd.DataFrame) -> tuple:
    return tuple(Presence(r.op, r.case_id, r.impl, r.case_group, r.verdict)
                 for r in df.sort_values(KEY).itertuples())


def compare(baseline: pd.DataFrame, current: pd.DataFrame, rule: Rule = Rule()) -> Comparison:
    """Everything that changed from `baseline` to `current` (results DataFrames)."""
    cols = KEY + ["case_group", "verdict", "reason", "time_median_s", "time_samples_s",
                  "l2_flush"]
    base, cur = (_plain(latest_rows(df).reindex(columns=cols)) for df in (baseline, current))
    common = cur.merge(base, on=KEY, how="inner", suffixes=("", "_b"))
    only_cur, only_base = _only(cur, base), _only(base, cur)

    timing = []
    both = _timed(common)
    same = _same_flush(both)
    timed = both[same]
    for r in timed[rule.beyond(timed["ratio"])].sort_values(KEY).itertuples():
        s_cur, s_base = kept_samples(r.time_samples_s), kept_samples(r.time_samples_s_b)
        p = mann_whitney_u(s_cur, s_base).p  # only changes beyond the factor need it
        timing.append(TimingChange(r.op, r.case_id, r.impl, r.case_group, r.m_base, r.m_cur,
                                   r.ratio, p, len(s_base), len(s_cur),
                                   rule.classify(r.ratio, p)))

    bad_now = common["verdict"].isin(BAD_VERDICTS)
    bad_before = common["verdict_b"].isin(BAD_VERDICTS)
    new_failures = [VerdictChange(r.op, r.case_id, r.impl, r.case_group, r.verdict_b,
                                  r.verdict, r.reason)
                    for r in common[bad_now & ~bad_before].sort_values(KEY).itertuples()]
    new_failures += [VerdictChange(r.op, r.case_id, r.impl, r.case_group, None, r.verdict,
                                   r.reason)
                     for r in only_cur[only_cur["verdict"].isin(BAD_VERDICTS)]
                     .sort_values(KEY).itertuples()]
    fixed = [VerdictChange(r.op, r.case_id, r.impl, r.case_group, r.verdict_b, r.verdict,
                           r.reason_b)
             for r in common[bad_before & (common["verdict"] == Verdict.PASS)]
             .sort_values(KEY).itertuples()]
    return Comparison(rule=rule, n_common=len(common), n_timed=len(timed),
                      n_flush_differs=int((~same).sum()),
                      timing=tuple(timing), new_failures=tuple(new_failures),
                      fixed_failures=tuple(fixed),
                      disappeared=_presence(only_base), new_cases=_presence(only_cur),
                      env_differences=_env_differences(baseline, current))
