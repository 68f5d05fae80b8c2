"""Known failures (expected): the failing items whose implementation declares the failure
(`known_failure`, e.g. Dao's documented padding behaviour), grouped by op, implementation
and declared reason. They are listed apart from the failures: they neither count as new
failures nor turn the page's banner red. Declared items that passed are unexpected
passes, shown in the summary.

The weak-yardstick items (`weak`) are listed apart the same way: beyond the bound where
the case's yardstick is weaker than it, with the yardstick's own output bit for bit (the
verdict `weak_yardstick`, whatever the implementation's name: the yardstick's own items
are among them)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from bwd_suite.reports.items import Items, case_label
from bwd_suite.suite.outcomes import Verdict
from bwd_suite.suite.reproduce import rerun_command

MAX_PER_GROUP = 200  # items listed per group; the count is complete


@dataclass(frozen=True)
class Item:
    op: str
    case_id: str
    label: str
    impl: str
    verdict: str
    failure_kind: str
    reason: str
    href: str  # the item's detail row ("" when the item is not listed)
    diagnosis: str  # the likely cause, as for a failure ("" when none was made)
    rerun: str  # the command that reruns the item alone (suite/reproduce.py)


@dataclass(frozen=True)
class Group:
    op: str
    impl: str
    declared: str  # the known_failure text
    items: tuple  # Item, at most MAX_PER_GROUP
    n_items: int
    verdicts: tuple  # (verdict, n)

    @property
    def n_hidden(self) -> int:
        return self.n_items - len(self.items)


@dataclass(frozen=True)
class Known:
    groups: tuple
    n_total: int
    n_unexpected_passes: int


def _text(v) -> str:
    return v if isinstance(v, str) else ""


WEAK_DECLARED = ("beyond the bound (fp32 with one rounding) where the case's yardstick is "
                 "weaker than it, with the yardstick's own output bit for bit")


def build(items: Items) -> Known:
    rows = items.rows
    return _groups(items, rows[rows["expected"]], rows["known"],
                   n_unexpected_passes=int(rows["xpass"].sum()))


def weak(items: Items) -> Known:
    """The items as weak as the yardstick (verdict weak_yardstick), per op and
    implementation."""
    rows = items.rows
    chosen = rows[rows["verdict"] == Verdict.WEAK_YARDSTICK]
    return _groups(items, chosen, pd.Series(WEAK_DECLARED, index=rows.index), 0)


def _groups(items: Items, exp, declared_by, n_unexpected_passes: int) -> Known:
    exp = exp.assign(known=declared_by.loc[exp.index])
    groups = []
    for op in items.ops():
        of_op = exp[exp["op"] == op]
        for impl in items.impls(op):
            of_impl = of_op[of_op["impl"] == impl]
            for declared in sorted(set(of_impl["known"])):
                g = of_impl[of_impl["known"] == declared].sort_values(
                    ["case_group", "case_rank"], kind="stable")
                listed = tuple(
                    Item(r.op, r.case_id,
                         f"{r.case_group}/{case_label(r.op, r.case_group, r.case_id)}",
                         r.impl, r.verdict, _text(r.failure_kind), _text(r.reason),
                         f"#{r.anchor}" if r.shown else "",
                         _text(getattr(r, "diagnosis", None)), rerun_command(r) or "")
                    for r in g.head(MAX_PER_GROUP).itertuples())
                counts = g["verdict"].value_counts()
                groups.append(Group(op, impl, declared, listed, len(g),
                                    tuple((str(v), int(n)) for v, n in counts.items())))
    return Known(groups=tuple(groups), n_total=len(exp),
                 n_unexpected_passes=n_unexpected_passes)
