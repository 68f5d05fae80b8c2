"""What changed between a baseline run and a current run, and where a series of runs
stepped.

Per (op, case_id, impl) present in both: the ratio of median times and a two-sided
Mann-Whitney U test on the kept samples. As in asv's `compare`, a change is flagged only
when both agree: ratio > factor (default 1.10) and p < alpha (default 0.01) is a
regression, ratio < 1/factor and p < alpha an improvement; beyond the factor but not
significant is `uncertain` (asv's "~"). Verdict changes and cases present in one run only
are listed separately; a failure the implementation declares (`known_failure`) is
expected, and a declared failure that passes is an unexpected pass (pytest's strict
xfail). Timings taken on another device (`device_name`) or after another kind of L2 flush
(`l2_flush`) are not compared: those alone move them (docs/timing.md#l2-flush). Nor are
timings whose ratio means nothing, listed apart as `noisy` with the reason: a run's
spread (IQR over median) past MAX_SPREAD, or on a CPU the host's load (`host_load`:
other processes' share of the cores) past MAX_HOST_LOAD (docs/timing.md#host-load). When
no timed item is left to compare, the comparison says why (`vacuous_reason`) instead of
passing. `detect_steps` finds the steps of one item's medians over many runs (the report's
history). Pure Python and pandas: no torch import (2 s), no scipy.
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

from bwd_suite.suite.outcomes import BAD_VERDICTS, Verdict
from bwd_suite.suite.reproduce import rerun_command

KEY = ["op", "case_id", "impl"]
# exact null distribution of U up to this n1*n2 (cached per size pair), else normal
EXACT_MAX_CELLS = 2500
# run-level columns whose difference makes timings suspect (not the host: CI runners change)
ENV_COLUMNS = ("device_name", "driver", "torch_version", "cuda_version", "l2_flush",
               "timing_pacing")
# A run's interquartile range over its median past this: the middle half of the samples
# spans more than half the median, and the median itself can move past any factor by where
# the scheduler struck (the loaded runs: samples at multiples of 4 ms time slices).
MAX_SPREAD = 0.5
# Other processes' share of the cores (host_load) past this, in a CPU timing: on a 2-core
# host they then keep more than one core busy on average, none is left to spare for the
# timed thread, and it is time-sliced (x2440 between identical runs). GPU timings read
# device clocks and are not held to it.
MAX_HOST_LOAD = 0.5
# suite.timing.CPU_METHOD, the timing_method of CPU rows (not imported: it imports torch)
CPU_TIMING_METHOD = "perf_counter"
SPREAD, HOST_LOAD = "spread", "host load"  # Noise.what


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


@lru_cache(maxsize=512)
def _u_cumulative(m: int, n: int) -> tuple:
    """Running sums of _u_counts(m, n): orderings with U <= k, for k = 0..m*n."""
    out, total = [], 0
    for c in _u_counts(m, n):
        total += c
        out.append(total)
    return tuple(out)


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
        cum = _u_cumulative(n1, n2)
        total = cum[-1]
        k = int(round(u))
        tail = min(cum[k], total - (cum[k - 1] if k else 0))  # P(U <= k), P(U >= k)
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
    """One item timed in both runs, on the same device after the same L2 flush."""

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

    @property
    def flagged(self) -> bool:
        """A regression or an improvement: beyond the factor and significant."""
        return self.change in (Change.REGRESSION, Change.IMPROVEMENT)


@dataclass(frozen=True)
class Noise:
    """Why one run's timing of an item cannot carry a ratio."""

    side: str  # "baseline" or "current"
    what: str  # SPREAD (IQR over median) or HOST_LOAD
    value: float

    def __str__(self) -> str:
        return f"{self.side} {self.what} {self.value:.3g}" + (
            " of the median" if self.what == SPREAD else "")


@dataclass(frozen=True)
class NoisyTiming:
    """An item timed in both runs, on one device after one flush, whose ratio of medians
    means nothing (`noise` says why): neither a regression nor an improvement."""

    op: str
    case_id: str
    impl: str
    case_group: str
    base_median_s: float
    cur_median_s: float
    ratio: float  # current / baseline median, for the record only
    noise: tuple  # Noise, one per limit passed

    @property
    def reason(self) -> str:
        return "; ".join(map(str, self.noise))


@dataclass(frozen=True)
class VerdictChange:
    op: str
    case_id: str
    impl: str
    case_group: str
    before: Optional[str]  # None: the case is new in the current run
    after: str
    reason: str  # the current reason (a new failure) or the baseline's (a fixed one)
    rerun: str = ""  # the command that reruns a failing item (suite/reproduce.py)


@dataclass(frozen=True)
class KnownItem:
    """An item of the current run whose implementation declares it fails
    (`known_failure`): an expected failure, or an unexpected pass."""

    op: str
    case_id: str
    impl: str
    case_group: str
    before: Optional[str]  # the baseline's verdict; None: not in the baseline
    verdict: str
    known_failure: str  # the declared reason
    reason: str  # the current reason (empty on a pass)
    rerun: str = ""  # the command that reruns the item (suite/reproduce.py)


@dataclass(frozen=True)
class Presence:
    """An item present in one run only."""

    op: str
    case_id: str
    impl: str
    case_group: str
    verdict: str


def _timing_order(t: TimingChange) -> tuple:
    """Regressions (worst first), improvements (best first), uncertain, unchanged (both
    by distance from x1)."""
    rank = {Change.REGRESSION: 0, Change.IMPROVEMENT: 1, Change.UNCERTAIN: 2,
            Change.UNCHANGED: 3}[t.change]
    return rank, -abs(math.log(t.ratio)), t.op, t.case_id, t.impl


@dataclass(frozen=True)
class Comparison:
    rule: Rule
    n_common: int  # items in both runs
    n_timed: int  # of those, timed in both on the same device after the same L2 flush
    timing: tuple  # TimingChange beyond the factor (regression, improvement, uncertain)
    new_failures: tuple  # VerdictChange: in both runs, fail/error/timeout now and not
    #                      before (or an expected failure before), not a known failure now
    fixed_failures: tuple  # VerdictChange: fail/error/timeout before, pass now (undeclared)
    disappeared: tuple  # Presence in the baseline only
    new_cases: tuple  # Presence in the current run only
    env_differences: tuple  # "device_name: A -> B"
    n_flush_differs: int = 0  # timed in both on one device, after different L2 flushes
    failing_new_cases: tuple = ()  # VerdictChange: not in the baseline, failing, undeclared
    known_failures: tuple = ()  # KnownItem: declared and failing now (expected)
    unexpected_passes: tuple = ()  # KnownItem: declared to fail, passed
    compared: tuple = ()  # TimingChange of every compared item, flagged ones first
    n_device_differs: int = 0  # timed in both, on different devices (device_name)
    n_timed_both: int = 0  # timed in both runs, whatever the device and flush
    flush_pairs: tuple = ()  # "dirty -> clean" of the items not compared for the flush
    device_pairs: tuple = ()  # "A -> B" of the items not compared for the device
    noisy: tuple = ()  # NoisyTiming: timed in both on one device after one flush, but
    #                    too noisy to compare (not in n_timed)

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
    def geomean(self) -> tuple:
        """(the geometric mean of the compared items' ratios, how many): how the current
        run moved as a whole; (None, 0) when no timing was compared."""
        return geometric_mean(t.ratio for t in self.compared)

    @property
    def geomean_per_op(self) -> dict:
        """op -> (geometric mean of its compared ratios, how many), ops sorted."""
        per: dict = {}
        for t in self.compared:
            per.setdefault(t.op, []).append(t.ratio)
        return {op: geometric_mean(r) for op, r in sorted(per.items())}

    @property
    def gate_failed(self) -> bool:
        """What CI gates on: a significant slowdown, a new failure (of a case in both runs
        or a new case), or an unexpected pass. Known failures are expected."""
        return bool(self.regressions or self.new_failures or self.failing_new_cases
                    or self.unexpected_passes)

    @property
    def vacuous_reason(self) -> Optional[str]:
        """Why no timed item could be compared, in one line; None when some were. A gate
        that compared no timing would pass without having looked."""
        if self.n_timed:
            return None
        if not self.n_common:
            return "the runs share no (op, case, implementation)"
        if not self.n_timed_both:
            return (f"none of the {self.n_common} items in both runs was timed in both "
                    f"(a run without timing?)")
        parts = []
        if self.n_device_differs:
            parts.append(f"{self.n_device_differs} on different devices "
                         f"({'; '.join(self.device_pairs)})")
        if self.n_flush_differs:
            parts.append(f"{self.n_flush_differs} after different L2 flushes "
                         f"({'; '.join(self.flush_pairs)})")
        rules = ["timings are compared on one device after one kind of flush only"] \
            if parts else []
        if self.noisy:
            parts.append(f"{len(self.noisy)} too noisy to compare ({self.noise_summary})")
            rules.append(f"the timings were too noisy (spread over {MAX_SPREAD:g} of the "
                         f"median, or host load over {MAX_HOST_LOAD:g} on a CPU)")
        return (f"of the {self.n_timed_both} items timed in both runs, "
                + " and ".join(parts) + ": " + "; ".join(rules))

    @property
    def noise_summary(self) -> str:
        """How many noisy items passed each limit: "current host load over 0.5 in 8"."""
        limits = {SPREAD: MAX_SPREAD, HOST_LOAD: MAX_HOST_LOAD}
        seen = Counter((n.side, n.what) for t in self.noisy for n in t.noise)
        return "; ".join(f"{side} {what} over {limits[what]:g}"
                         + (" of the median" if what == SPREAD else "") + f" in {k}"
                         for (side, what), k in seen.most_common())

    def exit_code(self, allow_untimed: bool = False) -> int:
        """The CI gate: 3 when the runs share no item; else 1 when the gate failed; else 3
        when no timed item could be compared (unless `allow_untimed`); else 0."""
        if not self.overlaps:
            return EXIT_NOT_COMPARED
        if self.gate_failed:
            return EXIT_REGRESSED
        if not self.n_timed and not allow_untimed:
            return EXIT_NOT_COMPARED
        return EXIT_OK


EXIT_OK, EXIT_REGRESSED, EXIT_NOT_COMPARED = 0, 1, 3  # 2: bad input (suite.errors)


def geometric_mean(values) -> tuple:
    """(geometric mean, count) of the positive finite values; (None, 0) without any."""
    v = [x for x in values if x and x > 0 and math.isfinite(x)]
    return (math.exp(sum(map(math.log, v)) / len(v)) if v else None), len(v)


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
    if hasattr(value, "tolist"):  # a numpy array, as read_results gives: 10x faster
        return [float(x) for x in value.tolist()]
    return [float(x) for x in value]


def _n_samples(value) -> int:
    return 0 if value is None or isinstance(value, float) else len(value)


def median_of(recorded, samples) -> Optional[float]:
    """The recorded median, or the samples' where it is missing."""
    if recorded is not None and not pd.isna(recorded) and recorded > 0:
        return float(recorded)
    s = sorted(kept_samples(samples))
    if not s:
        return None
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


_median = median_of


def _same(common: pd.DataFrame, col: str) -> pd.Series:
    """Whether each item's two rows hold the same value of `col` (missing on both sides,
    or a frame without the column, counts as the same)."""
    if col not in common or f"{col}_b" not in common:
        return pd.Series(True, index=common.index)
    cur, base = common[col], common[f"{col}_b"]
    return (cur == base).fillna(False).astype(bool) | (cur.isna() & base.isna())


def _same_flush(common: pd.DataFrame) -> pd.Series:
    """Whether each item's two timings followed the same kind of L2 flush."""
    return _same(common, "l2_flush")


def _pairs(rows: pd.DataFrame, col: str) -> tuple:
    """"baseline -> current" of the values of `col` in `rows`, most frequent first."""
    pairs = Counter(f"{'-' if pd.isna(b) else b} -> {'-' if pd.isna(c) else c}"
                    for b, c in zip(rows[f"{col}_b"], rows[col]))
    return tuple(p for p, _ in pairs.most_common(3))


def _timed(common: pd.DataFrame) -> pd.DataFrame:
    """Items with samples in both runs, with their medians and ratio (vectorized: a
    nightly run holds tens of thousands of items)."""
    n_cur = common["time_samples_s"].map(_n_samples)
    n_base = common["time_samples_s_b"].map(_n_samples)
    t = common[(n_cur > 0) & (n_base > 0)]
    t = t.assign(m_cur=list(map(median_of, t["time_median_s"], t["time_samples_s"])),
                 m_base=list(map(median_of, t["time_median_s_b"], t["time_samples_s_b"])))
    t = t[(t["m_cur"] > 0) & (t["m_base"] > 0)]
    return t.assign(ratio=t["m_cur"] / t["m_base"])


def _present(v) -> bool:
    return v is not None and not pd.isna(v)


def _side_noise(side: str, iqr, median: float, method, load) -> list:
    """The limits one run's timing of an item passes; a missing IQR or host load (files
    from before it was recorded) passes none."""
    out = []
    if _present(iqr) and median > 0 and iqr > MAX_SPREAD * median:
        out.append(Noise(side, SPREAD, iqr / median))
    if method == CPU_TIMING_METHOD and _present(load) and load > MAX_HOST_LOAD:
        out.append(Noise(side, HOST_LOAD, float(load)))
    return out


def _noise(r) -> tuple:
    """Why an item's ratio means nothing (a row of `_timed`), baseline first; () when it
    means something."""
    return tuple(_side_noise("baseline", r.time_iqr_s_b, r.m_base, r.timing_method_b,
                             r.host_load_b)
                 + _side_noise("current", r.time_iqr_s, r.m_cur, r.timing_method,
                               r.host_load))


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


def declared(known: pd.Series) -> pd.Series:
    """Whether each row declares a known failure (a non-empty `known_failure`)."""
    return known.notna() & (known.astype(object).fillna("").astype(str) != "")


def _text(v) -> str:
    return "" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)


# the columns the rerun command of a current item is built from (suite/reproduce.py)
RERUN_COLUMNS = ["case_file", "tags", "impl_origin", "device", "profile", "det_repeats",
                 "timing_method"]


def compare(baseline: pd.DataFrame, current: pd.DataFrame, rule: Rule = Rule()) -> Comparison:
    """Everything that changed from `baseline` to `current` (results DataFrames)."""
    cols = KEY + ["case_group", "verdict", "reason", "known_failure", "time_median_s",
                  "time_samples_s", "time_iqr_s", "host_load", "l2_flush",
                  "device_name"] + RERUN_COLUMNS
    base, cur = (_plain(latest_rows(df).reindex(columns=cols)) for df in (baseline, current))
    common = cur.merge(base, on=KEY, how="inner", suffixes=("", "_b"))
    only_cur, only_base = _only(cur, base), _only(base, cur)

    both = _timed(common)
    same_device = _same(both, "device_name")
    same_flush = _same_flush(both)
    timed = both[same_device & same_flush]
    compared, noisy = [], []
    for r in timed.itertuples():
        noise = _noise(r)
        if noise:
            noisy.append(NoisyTiming(r.op, r.case_id, r.impl, r.case_group, r.m_base, r.m_cur,
                                     r.ratio, noise))
            continue
        s_cur, s_base = kept_samples(r.time_samples_s), kept_samples(r.time_samples_s_b)
        p = mann_whitney_u(s_cur, s_base).p
        compared.append(TimingChange(r.op, r.case_id, r.impl, r.case_group, r.m_base, r.m_cur,
                                     r.ratio, p, len(s_base), len(s_cur),
                                     rule.classify(r.ratio, p)))
    compared.sort(key=_timing_order)
    timing = sorted((t for t in compared if t.change is not Change.UNCHANGED),
                    key=lambda t: (t.op, t.case_id, t.impl))

    bad_now = common["verdict"].isin(BAD_VERDICTS)
    bad_before = common["verdict_b"].isin(BAD_VERDICTS)
    known_now, known_before = declared(common["known_failure"]), \
        declared(common["known_failure_b"])
    unexpected_before = bad_before & ~known_before
    new_failures = tuple(
        VerdictChange(r.op, r.case_id, r.impl, r.case_group, r.verdict_b, r.verdict,
                      _text(r.reason), rerun_command(r) or "")
        for r in common[bad_now & ~known_now & ~unexpected_before].sort_values(KEY)
        .itertuples())
    cur_bad = only_cur["verdict"].isin(BAD_VERDICTS)
    failing_new = tuple(
        VerdictChange(r.op, r.case_id, r.impl, r.case_group, None, r.verdict, _text(r.reason),
                      rerun_command(r) or "")
        for r in only_cur[cur_bad & ~declared(only_cur["known_failure"])].sort_values(KEY)
        .itertuples())
    fixed = tuple(VerdictChange(r.op, r.case_id, r.impl, r.case_group, r.verdict_b, r.verdict,
                                _text(r.reason_b))
                  for r in common[bad_before & (common["verdict"] == Verdict.PASS)
                                  & ~known_now].sort_values(KEY).itertuples())
    # every current item that declares a known failure, with its baseline verdict
    cur_known = cur[declared(cur["known_failure"])].merge(
        base[KEY + ["verdict"]], on=KEY, how="left", suffixes=("", "_b")).sort_values(KEY)
    known, xpass = [], []
    for r in cur_known.itertuples():
        item = KnownItem(r.op, r.case_id, r.impl, r.case_group,
                         None if pd.isna(r.verdict_b) else r.verdict_b, r.verdict,
                         _text(r.known_failure), _text(r.reason), rerun_command(r) or "")
        if r.verdict in BAD_VERDICTS:
            known.append(item)
        elif r.verdict == Verdict.PASS:
            xpass.append(item)
    other_device = both[~same_device]
    other_flush = both[same_device & ~same_flush]
    return Comparison(rule=rule, n_common=len(common), n_timed=len(compared),
                      n_flush_differs=len(other_flush), n_device_differs=len(other_device),
                      n_timed_both=len(both),
                      flush_pairs=_pairs(other_flush, "l2_flush") if len(other_flush) else (),
                      device_pairs=_pairs(other_device, "device_name")
                      if len(other_device) else (),
                      timing=tuple(timing), compared=tuple(compared),
                      noisy=tuple(sorted(noisy, key=lambda t: (t.op, t.case_id, t.impl))),
                      new_failures=new_failures, failing_new_cases=failing_new,
                      fixed_failures=fixed, known_failures=tuple(known),
                      unexpected_passes=tuple(xpass),
                      disappeared=_presence(only_base), new_cases=_presence(only_cur),
                      env_differences=_env_differences(baseline, current))


# -- steps over many runs (the report's history) -------------------------------------------

@dataclass(frozen=True)
class Step:
    """A change-point of one item's timings over a series of runs."""

    index: int  # position (in the series given) of the first run after the step
    before_s: float  # median of the runs' medians before it (within its segment)
    after_s: float  # ... and after it
    ratio: float  # after / before: above 1 is slower
    p: float  # Mann-Whitney U of the pooled samples after against before

    @property
    def slower(self) -> bool:
        return self.ratio > 1


def _plain_median(values: Sequence[float]) -> float:
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def detect_steps(medians: Sequence[float], samples: Sequence[Sequence[float]],
                 rule: Rule = Rule()) -> list:
    """The steps of a series of runs' medians (in run order), by binary segmentation. In a
    segment, a split at k is a candidate when the median of the medians after it differs
    from the median of those before by more than the rule's factor; candidates are tried
    best fit first (the smallest sum of absolute log deviations of the medians from their
    side's median: the split that best describes the segment as two constant levels, as
    asv's step detection fits piecewise-constant levels), and the first whose pooled
    samples after and before differ by a two-sided Mann-Whitney U test at p < alpha is a
    step; each side is then searched the same way. A single outlying run inside a segment
    moves neither median and is not a step; one at the end of the series is (it may be the
    start of one). `samples[i]` are run i's kept samples (empty: the medians alone decide,
    p = 0). Returns the steps in run order."""
    n = len(medians)
    if n < 2 or len(samples) != n:
        return []
    meds = [float(m) for m in medians]
    if not all(m > 0 for m in meds):
        raise ValueError("detect_steps needs positive medians")
    if max(meds) <= min(meds) * rule.factor:  # nothing can pass the factor: most items
        return []
    logs = [math.log(m) for m in meds]
    steps: list = []

    def cost(lo: int, hi: int) -> float:
        centre = _plain_median(logs[lo:hi])
        return sum(abs(x - centre) for x in logs[lo:hi])

    def split(lo: int, hi: int) -> None:
        if hi - lo < 2:
            return
        candidates = []
        for k in range(lo + 1, hi):
            before, after = _plain_median(meds[lo:k]), _plain_median(meds[k:hi])
            ratio = after / before
            if rule.beyond(ratio):
                candidates.append((cost(lo, k) + cost(k, hi), -abs(math.log(ratio)), k,
                                   before, after, ratio))
        for _, _, k, before, after, ratio in sorted(candidates):
            a = [x for s in samples[k:hi] for x in s]
            b = [x for s in samples[lo:k] for x in s]
            p = mann_whitney_u(a, b).p if a and b else 0.0
            if p < rule.alpha:
                steps.append(Step(k, before, after, ratio, p))
                split(lo, k)
                split(k, hi)
                return

    split(0, n)
    return sorted(steps, key=lambda s: s.index)
