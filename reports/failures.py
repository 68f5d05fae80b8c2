"""Failures: each failing, raising or timed-out listed item that its implementation does
not declare (known failures have their own section, reports/known.py), grouped per op by
its diagnosed cause (the `diagnosis_cause` column; "unclassified" where there is none),
biggest group first: its reason, the outputs beyond tolerance and their metrics, the
determinism spread, when the results carry one the `diagnosis` column, and the command
that reruns the item alone."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import pandas as pd

from bwd_suite.reports import fmt, outputs
from bwd_suite.reports.items import Items, case_label
from bwd_suite.suite.reproduce import rerun_command


@dataclass(frozen=True)
class Failure:
    anchor: str  # this entry
    detail: str  # the item's detail row
    op: str
    group: str
    case_id: str
    label: str
    impl: str
    verdict: str
    failure_kind: str
    reason: str
    determinism: str
    det_spread: fmt.Num
    diagnosis: Optional[str]  # None where the results have no diagnosis column
    cause: str  # the diagnosis' cause key, when given
    outputs: tuple  # outputs.OutputMetrics beyond tolerance
    rerun: str = ""  # the command that reruns the item alone (suite/reproduce.py)

    @property
    def rowspan(self) -> int:
        return max(1, len(self.outputs))


UNCLASSIFIED = "unclassified"  # the group of failures without a diagnosed cause


@dataclass(frozen=True)
class Group:
    op: str
    cause: str  # the diagnosis_cause, or UNCLASSIFIED
    items: tuple  # Failure
    n_hidden: int  # failing items without an entry (unlisted, or past the budget)
    n_items: int  # every failing item of the group
    sweeps: tuple  # (sweep, n failing items) in run order


@dataclass(frozen=True)
class Failures:
    groups: tuple
    has_diagnosis: bool
    n_total: int  # undeclared failing items, listed or not
    n_hidden: int
    n_expected: int = 0  # declared known failures, in their own section

    @property
    def ncols(self) -> int:
        return 10 + self.has_diagnosis


def _text(v) -> str:
    return "" if v is None or (isinstance(v, float) and pd.isna(v)) else str(v)


def _failure(r, has_diag: bool) -> Failure:
    outs = tuple(m for m in map(outputs.metrics, outputs.of(r.outputs)) if m.failing)
    return Failure(
        anchor=f"f{r.anchor}", detail=r.anchor, op=r.op, group=r.case_group,
        case_id=r.case_id, label=f"{r.case_group}/{case_label(r.op, r.case_group, r.case_id)}",
        impl=r.impl,
        verdict=r.verdict, failure_kind=_text(r.failure_kind), reason=_text(r.reason),
        determinism=_text(r.determinism), det_spread=fmt.sig(r.det_spread),
        diagnosis=_text(getattr(r, "diagnosis", None)) if has_diag else None,
        cause=_text(getattr(r, "diagnosis_cause", None)), outputs=outs,
        rerun=rerun_command(r) or "")


def _cause(v) -> str:
    text = _text(v)
    return text or UNCLASSIFIED


def build(items: Items) -> Failures:
    rows = items.rows
    bad = rows[rows["unexpected"]]
    # the column appears with the results that carry one (schema 2 on): files upgraded
    # from version 1 hold nulls only, and an empty column would say nothing
    has_diag = "diagnosis" in rows.columns and bool(
        bad["diagnosis"].fillna("").astype(str).str.len().gt(0).any())
    cols = [c for c in ("op", "case_group", "case_id", "impl", "anchor", "verdict",
                        "failure_kind", "reason", "determinism", "det_spread", "outputs",
                        "diagnosis", "diagnosis_cause", "case_rank", "entry", "case_file",
                        "tags", "impl_origin", "device", "profile", "det_repeats",
                        "timing_method")
            if c in bad.columns]
    bad = bad[cols]
    causes = [_cause(v) for v in bad["diagnosis_cause"]] if "diagnosis_cause" in bad \
        else [UNCLASSIFIED] * len(bad)
    bad = bad.assign(_cause=causes)
    sweep_order = {(op, g): k for op in items.ops() for k, g in enumerate(items.groups(op))}
    bad = bad.assign(_sweep=[sweep_order.get(k, 0) for k in zip(bad["op"], bad["case_group"])])
    groups = []
    for op in items.ops():
        of_op = bad[bad["op"] == op]
        sizes = of_op["_cause"].value_counts()
        # biggest cause first; unclassified last; ties by name
        for cause in sorted(sizes.index, key=lambda c: (c == UNCLASSIFIED, -sizes[c], c)):
            g = of_op[of_op["_cause"] == cause]
            shown = g[g["entry"]].sort_values(["_sweep", "case_rank", "impl"], kind="stable")
            per_sweep = g.groupby("case_group", sort=False).size()
            sweeps = tuple(sorted(((str(k), int(n)) for k, n in per_sweep.items()),
                                  key=lambda kv: sweep_order.get((op, kv[0]), 0)))
            groups.append(Group(op, cause, tuple(_failure(r, has_diag)
                                                 for r in shown.itertuples(index=False)),
                                len(g) - len(shown), len(g), sweeps))
    return Failures(groups=tuple(groups), has_diagnosis=has_diag, n_total=len(bad),
                    n_hidden=sum(g.n_hidden for g in groups),
                    n_expected=int(rows["expected"].sum()))
