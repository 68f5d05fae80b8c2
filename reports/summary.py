"""Run summary: the environment of each run, where the rows ran when they span several
hosts or devices (the shards of a run, a run's workers on several GPUs), verdict and
determinism counts per op and implementation over every row, the known failures (declared
by the implementation: expected) and the unexpected passes (declared, and passed: the
declaration is stale)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from bwd_suite.reports import fmt
from bwd_suite.reports.items import Items, case_label, verdict_order
from bwd_suite.suite.outcomes import Determinism

ENV_FIELDS = (  # (column, label)
    ("run_id", "run"), ("run_started", "started"), ("git_commit", "commit"), ("host", "host"),
    ("device", "device"), ("device_name", "device name"), ("driver", "driver"),
    ("torch_version", "torch"), ("cuda_version", "CUDA"), ("python_version", "Python"),
    ("profile", "profile"), ("l2_flush", "L2 flush"), ("timing_pacing", "GPU pacing"),
)
DETERMINISM = tuple(Determinism)  # columns of the determinism counts


@dataclass(frozen=True)
class RunInfo:
    fields: tuple  # (label, value) in ENV_FIELDS order
    rows: fmt.Num
    copy_gbps: fmt.Num


@dataclass(frozen=True)
class CountRow:
    op: str
    impl: str
    impl_kind: str
    items: fmt.Num
    verdicts: tuple  # fmt.Num per Summary.verdicts
    determinism: tuple  # fmt.Num per DETERMINISM
    timed: fmt.Num
    bad: bool  # some undeclared fail, error or timeout, or an unexpected pass
    expected: fmt.Num = fmt.NONE  # failures the implementation declares (known_failure)
    xpass: fmt.Num = fmt.NONE  # declared failures that passed


@dataclass(frozen=True)
class Place:
    """The rows of one host and device."""

    host: str
    device: str  # as the run named it: cuda:1 is the run's second GPU
    device_name: str
    runs: fmt.Num
    rows: fmt.Num
    unexpected: fmt.Num  # undeclared failures, errors and timeouts
    timed: fmt.Num


@dataclass(frozen=True)
class UnexpectedPass:
    op: str
    case_id: str
    label: str
    impl: str
    known_failure: str  # the stale declaration
    href: str  # the item's detail row


@dataclass(frozen=True)
class Summary:
    runs: tuple  # RunInfo per run
    verdicts: tuple  # column order of CountRow.verdicts
    determinism: tuple
    counts: tuple  # CountRow
    total: CountRow
    unexpected_passes: tuple = ()  # UnexpectedPass
    n_unexpected_passes: int = 0  # all of them (the list is capped)
    n_expected: int = 0  # known failures that failed
    n_unexpected: int = 0  # undeclared failures, errors and timeouts
    places: tuple = ()  # Place per (host, device) when the rows ran on more than one


def _run_value(col: pd.Series) -> str:
    """A run-level column's value: its distinct values, nulls left out (l2_flush and
    timing_pacing are null on untimed rows; the others hold one value a run)."""
    return ", ".join(sorted(map(str, col.dropna().unique())))


def _runs(df: pd.DataFrame) -> tuple:
    out = []
    for run_id, r in df.groupby("run_id", sort=False):
        fields = tuple((label, _run_value(r[col])) for col, label in ENV_FIELDS if col in r)
        copy = r["copy_gbps"].dropna()
        out.append(RunInfo(fields=fields, rows=fmt.count(len(r)),
                           copy_gbps=fmt.fixed(copy.iloc[0] if len(copy) else None)))
    return tuple(sorted(out, key=lambda i: dict(i.fields).get("started", "")))


def _places(rows: pd.DataFrame) -> tuple:
    """The rows grouped by host and device, where they differ."""
    where = rows.assign(host=rows["host"].fillna(""), device=rows["device"].fillna(""))
    if len(where[["host", "device"]].drop_duplicates()) < 2:
        return ()
    return tuple(Place(host=host, device=device, device_name=_run_value(r["device_name"]),
                       runs=fmt.count(r["run_id"].nunique()), rows=fmt.count(len(r)),
                       unexpected=fmt.count(int(r["unexpected"].sum())),
                       timed=fmt.count(int(r["timed"].sum())))
                 for (host, device), r in where.groupby(["host", "device"], sort=True))


def _count_row(op, impl, kind, r: pd.DataFrame, verdicts) -> CountRow:
    v = r["verdict"].value_counts()
    d = r["determinism"].value_counts()
    return CountRow(op=op, impl=impl, impl_kind=kind, items=fmt.count(len(r)),
                    verdicts=tuple(fmt.count(v.get(x, 0)) for x in verdicts),
                    determinism=tuple(fmt.count(d.get(x, 0)) for x in DETERMINISM),
                    timed=fmt.count(int(r["timed"].sum())),
                    bad=bool(r["unexpected"].any() or r["xpass"].any()),
                    expected=fmt.count(int(r["expected"].sum())),
                    xpass=fmt.count(int(r["xpass"].sum())))


MAX_UNEXPECTED_PASSES = 200


def build(items: Items, raw: pd.DataFrame) -> Summary:
    rows = items.rows
    verdicts = tuple(verdict_order(rows["verdict"].unique()))
    counts = []
    for op in items.ops():
        for impl in items.impls(op):
            r = rows[(rows["op"] == op) & (rows["impl"] == impl)]
            counts.append(_count_row(op, impl, r["impl_kind"].iloc[0], r, verdicts))
    xp = rows[rows["xpass"]].sort_values(["op", "case_group", "case_id", "impl"])
    passes = tuple(UnexpectedPass(r.op, r.case_id, f"{r.case_group}/"
                                  f"{case_label(r.op, r.case_group, r.case_id)}", r.impl,
                                  r.known, f"#{r.anchor}" if r.shown else "")
                   for r in xp.head(MAX_UNEXPECTED_PASSES).itertuples())
    return Summary(runs=_runs(raw), verdicts=verdicts, determinism=DETERMINISM,
                   counts=tuple(counts), total=_count_row("all", "", "", rows, verdicts),
                   unexpected_passes=passes, n_unexpected_passes=len(xp),
                   n_expected=int(rows["expected"].sum()),
                   n_unexpected=int(rows["unexpected"].sum()), places=_places(rows))
