"""Failures: each failing or raising listed item with its reason, the outputs beyond
tolerance and their metrics, the determinism spread and, when the results carry one,
the `diagnosis` column."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import pandas as pd

from reports import fmt, outputs
from reports.items import Items, case_label


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

    @property
    def rowspan(self) -> int:
        return max(1, len(self.outputs))


@dataclass(frozen=True)
class Group:
    op: str
    group: str
    items: tuple  # Failure
    n_hidden: int  # failing items without an entry (unlisted, or past the budget)


@dataclass(frozen=True)
class Failures:
    groups: tuple
    has_diagnosis: bool
    n_total: int  # failing items, listed or not
    n_hidden: int

    @property
    def ncols(self) -> int:
        return 10 + self.has_diagnosis


def _text(v) -> str:
    return "" if v is None or (isinstance(v, float) and pd.isna(v)) else str(v)


def _failure(r, has_diag: bool) -> Failure:
    outs = tuple(m for m in map(outputs.metrics, outputs.of(r.outputs)) if m.failing)
    return Failure(
        anchor=f"f{r.anchor}", detail=r.anchor, op=r.op, group=r.case_group,
        case_id=r.case_id, label=case_label(r.op, r.case_group, r.case_id), impl=r.impl,
        verdict=r.verdict, failure_kind=_text(r.failure_kind), reason=_text(r.reason),
        determinism=_text(r.determinism), det_spread=fmt.sig(r.det_spread),
        diagnosis=_text(getattr(r, "diagnosis", None)) if has_diag else None,
        cause=_text(getattr(r, "diagnosis_cause", None)), outputs=outs)


def build(items: Items) -> Failures:
    rows = items.rows
    bad = rows[rows["bad"]]
    # the column appears with the results that carry one (schema 2 on): files upgraded
    # from version 1 hold nulls only, and an empty column would say nothing
    has_diag = "diagnosis" in rows.columns and bool(
        bad["diagnosis"].fillna("").astype(str).str.len().gt(0).any())
    cols = [c for c in ("op", "case_group", "case_id", "impl", "anchor", "verdict",
                        "failure_kind", "reason", "determinism", "det_spread", "outputs",
                        "diagnosis", "diagnosis_cause", "case_rank", "entry")
            if c in bad.columns]
    bad = bad[cols]
    groups = []
    for op in items.ops():
        for group in items.groups(op):
            g = bad[(bad["op"] == op) & (bad["case_group"] == group)]
            if len(g):
                shown = g[g["entry"]].sort_values(["case_rank", "impl"], kind="stable")
                groups.append(Group(op, group, tuple(_failure(r, has_diag)
                                                     for r in shown.itertuples(index=False)),
                                    len(g) - len(shown)))
    return Failures(groups=tuple(groups), has_diagnosis=has_diag, n_total=len(bad),
                    n_hidden=sum(g.n_hidden for g in groups))
