"""The items a report is built from: one row per (op, case, implementation), and which
of them the page lists.

A big run (20,000 rows) cannot list every item and stay readable (or small): per (op,
sweep) the first cases are listed, failing ones first, then the unsupported, then passing
ones in run order; at most `cap` cases, and fewer when the sweeps together would list
more than ITEM_BUDGET items. Likewise at most about FAILURE_BUDGET failing items get a
full failure entry. Counts, geometric means and regressions always use every row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import pandas as pd

from bwd_suite.suite.outcomes import BAD_VERDICTS, Verdict
from bwd_suite.suite.regression import latest_rows

ITEM_BUDGET = 4000  # listed items over all sweeps (each costs a matrix cell and rows)
MIN_GROUP_ITEMS = 40  # ... but a sweep may always list this many
FAILURE_BUDGET = 1000  # failure entries over all sweeps (about 1.3 kB each)
MIN_GROUP_FAILURES = 10

# Display of each suite.verdicts.Verdict value (reports never import torch).
# Lower severity sorts first: what needs attention comes first.

@dataclass(frozen=True)
class VerdictStyle:
    verdict: str
    symbol: str
    severity: int


VERDICTS = {
    Verdict.ERROR: VerdictStyle("error", "!", 0),
    Verdict.TIMEOUT: VerdictStyle("timeout", "⧗", 0),
    Verdict.FAIL: VerdictStyle("fail", "✗", 1),
    # as weak as the yardstick where it is weaker than the bound: declared, listed apart
    Verdict.WEAK_YARDSTICK: VerdictStyle("weak_yardstick", "≈", 2.7),
    Verdict.UNSUPPORTED: VerdictStyle("unsupported", "–", 3),
    Verdict.PASS: VerdictStyle("pass", "✓", 4),
}
UNKNOWN_SEVERITY = 2  # a verdict this report does not know yet: shown, sorted early
UNEXPECTED_PASS_SEVERITY = 1.5  # a declared failure that passed: its declaration is stale
EXPECTED_SEVERITY = 2.5  # a declared failure that failed: after the unexpected ones


def severity(verdict: str, known: str) -> float:
    """Listing order of an item: its verdict's severity, or that of an expected failure or
    an unexpected pass when the implementation declares a known failure for it."""
    if known:
        if verdict in BAD_VERDICTS:
            return EXPECTED_SEVERITY
        if verdict == Verdict.PASS:
            return UNEXPECTED_PASS_SEVERITY
    return style(verdict).severity


def style(verdict: str) -> VerdictStyle:
    return VERDICTS.get(verdict) or VerdictStyle(str(verdict), "?", UNKNOWN_SEVERITY)


DISPLAY_ORDER = tuple(Verdict)  # columns of count tables


def verdict_order(present) -> list:
    """Known verdicts in display order, then any others present."""
    return list(DISPLAY_ORDER) + sorted(set(present) - set(DISPLAY_ORDER))


# implementation kinds in the order their columns appear
KIND_ORDER = ("reference", "native", "ours", "vendor", "external", "mutant")


@dataclass(frozen=True)
class Items:
    rows: pd.DataFrame  # every item, deduplicated, with the columns added by select()
    cap: int  # cases listed per (op, sweep), at most
    n_duplicates: int  # rows dropped because a later run held the same item
    op_groups: dict  # op -> its sweeps, both in run order

    @property
    def shown(self) -> pd.DataFrame:
        return self.rows[self.rows["shown"]]

    def impls(self, op: str) -> list:
        """Implementations of an op in column order: by kind, then name."""
        r = self.rows[self.rows["op"] == op][["impl", "impl_kind"]].drop_duplicates("impl")
        rank = {k: i for i, k in enumerate(KIND_ORDER)}
        return [i for _, i in sorted((rank.get(k, len(rank)), i)
                                     for i, k in zip(r["impl"], r["impl_kind"]))]

    def ops(self) -> list:
        return list(self.op_groups)

    def groups(self, op: str) -> list:
        """Sweeps of an op in run order."""
        return self.op_groups[op]


# the columns the sections read (others, such as ones a newer schema adds, are left out)
COLUMNS = ("run_id", "run_started", "host", "device", "device_name", "op", "case_id",
           "case_group", "impl", "impl_kind", "verdict", "failure_kind", "reason",
           "known_failure", "outputs", "diagnosis", "diagnosis_cause", "determinism",
           "det_spread", "time_samples_s", "time_median_s", "time_iqr_s", "bytes", "gbps",
           "copy_gbps", "frac_copy_bw", "frac_same_copy", "same_copy_s", "arith_intensity",
           "bound", "wall_median_ms", "launches", "stats_json", "impl_facts_json",
           "peak_mem_bytes", "flops",
           "tflops", "peak_tflops", "frac_peak_flops", "saved_bytes", "memory_bounds_json",
           # what the command that reruns an item is built from (suite/reproduce.py)
           "case_file", "tags", "impl_origin", "profile", "det_repeats", "timing_method",
           # training-step scenarios (reports/steps.py)
           "stages_json", "ledger_json")
# columns a frame may lack (rows built by hand, not read through suite.results): null
OPTIONAL = ("wall_median_ms", "launches", "stats_json", "impl_facts_json", "peak_mem_bytes",
            "host", "device",
            "flops", "tflops", "peak_tflops", "frac_peak_flops", "saved_bytes",
            "memory_bounds_json", "case_file", "tags", "impl_origin", "profile",
            "det_repeats", "timing_method", "stages_json", "ledger_json")


def _case_ranks(rows: pd.DataFrame) -> pd.Series:
    """Per row, its case's place in its sweep's listing: worst verdict first, then run
    order."""
    case = rows.groupby(["op", "case_group", "case_id"], sort=False).agg(
        worst=("severity", "min"))
    case["first"] = range(len(case))
    case = case.sort_values(["worst", "first"], kind="stable")
    case["rank"] = case.groupby(level=["op", "case_group"], sort=False).cumcount()
    return rows.join(case["rank"], on=["op", "case_group", "case_id"])["rank"]


def _case_caps(rows: pd.DataFrame, cap: int) -> pd.Series:
    """Per row, how many cases its sweep lists: `cap`, or fewer to keep the page within
    ITEM_BUDGET items (a sweep of many implementations lists fewer cases)."""
    n_groups = rows.groupby(["op", "case_group"], sort=False).ngroups
    per_group = max(MIN_GROUP_ITEMS, ITEM_BUDGET // max(n_groups, 1))
    impls = rows.groupby("op")["impl"].nunique()
    return rows["op"].map(lambda op: max(1, min(cap, per_group // impls[op])))


def _entries(rows: pd.DataFrame) -> pd.Series:
    """Listed failing items that get a failure entry: per sweep the first ones, so that
    FAILURE_BUDGET entries are shared among the sweeps with failures."""
    listed_bad = rows[rows["unexpected"] & rows["shown"]].sort_values("case_rank", kind="stable")
    n_groups = listed_bad.groupby(["op", "case_group"], sort=False).ngroups
    per_group = max(MIN_GROUP_FAILURES, FAILURE_BUDGET // max(n_groups, 1))
    rank = listed_bad.groupby(["op", "case_group"], sort=False).cumcount()
    entry = pd.Series(False, index=rows.index)
    entry[rank.index[rank.to_numpy() < per_group]] = True
    return entry


def select(df: pd.DataFrame, cap: int) -> Items:
    """Deduplicate, anchor every item, and mark the listed ones (`shown`) and those with
    a failure entry (`entry`: the unexpected failures). `known` holds the declared known
    failure ("" when none); `expected` marks the failures it declares, `xpass` the
    declared ones that passed, `unexpected` the failures nobody declared."""
    rows = latest_rows(df[[c for c in COLUMNS if c in df.columns]])
    rows = rows.assign(**{c: None for c in OPTIONAL if c not in rows.columns})
    n_dup = len(df) - len(rows)
    # plain Python strings: pandas' arrow-backed ones iterate ~20x slower row by row
    rows = rows.astype({c: object for c in rows.columns
                        if pd.api.types.is_string_dtype(rows[c].dtype)})
    known = rows["known_failure"] if "known_failure" in rows else pd.Series(None,
                                                                               index=rows.index)
    known = [k if isinstance(k, str) else "" for k in known]
    bad = rows["verdict"].isin(BAD_VERDICTS)
    declared = pd.Series([bool(k) for k in known], index=rows.index)
    rows = rows.assign(
        anchor=[f"i{k}" for k in range(len(rows))],
        bad=bad,
        known=known,
        expected=bad & declared,
        xpass=(rows["verdict"] == Verdict.PASS) & declared,
        unexpected=bad & ~declared,
        severity=[severity(v, k) for v, k in zip(rows["verdict"], known)],
        timed=rows["time_median_s"].notna() & (rows["time_median_s"] > 0),
    )
    rows["case_rank"] = _case_ranks(rows).to_numpy()
    rows["shown"] = rows["case_rank"] < _case_caps(rows, cap)
    rows["entry"] = _entries(rows)
    op_groups: dict = {}
    for op, group in dict.fromkeys(zip(rows["op"], rows["case_group"])):
        op_groups.setdefault(op, []).append(group)
    return Items(rows=rows, cap=cap, n_duplicates=n_dup, op_groups=op_groups)


def compute_bound(bound) -> bool:
    """Whether an item's `bound` says it is judged against the compute peak (TFLOP/s and
    frac_peak_flops), not the copy bandwidth."""
    return isinstance(bound, str) and bound == "compute"


@dataclass(frozen=True)
class Rate:
    """A compute-bound item's throughput: TFLOP/s and its fraction of the compute peak."""

    tflops: float
    frac_peak: Optional[float]  # None where the peak was not measured

    def text(self) -> str:
        return f"{self.tflops:.3g} TFLOP/s" + (
            f", {100 * self.frac_peak:.3g} % of peak" if self.frac_peak is not None else "")


def compute_rates(df: Optional[pd.DataFrame]) -> dict:
    """(op, case_id, impl) -> Rate of every compute-bound item of `df` with a TFLOP/s (the
    latest run's where several hold it); {} for None or a frame without the columns (files
    of schema 9 and older have none)."""
    if df is None or not {"tflops", "bound"} <= set(df.columns):
        return {}
    rows = latest_rows(df)
    rows = rows[rows["bound"].map(compute_bound).astype(bool) & rows["tflops"].notna()]
    frac = rows["frac_peak_flops"] if "frac_peak_flops" in rows else [None] * len(rows)
    return {(op, case, impl): Rate(float(t), None if f is None or pd.isna(f) else float(f))
            for op, case, impl, t, f in zip(rows["op"], rows["case_id"], rows["impl"],
                                           rows["tflops"], frac)}


def case_label(op: str, group: str, case_id: str) -> str:
    """The case id without its `op/group/` prefix, which the page shows as a heading."""
    prefix = f"{op}/{group}/"
    return case_id[len(prefix):] if case_id.startswith(prefix) else case_id
