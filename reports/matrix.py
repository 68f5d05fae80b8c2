"""The conformance matrix: per op and sweep, a row per case and a column per
implementation; each cell links to the item's failure entry or its detail row.

Sweeps where every item passes start collapsed; each sweep lists at most `Items.cap`
cases (failing first) and says how many more it holds.
"""

from __future__ import annotations

from dataclasses import dataclass

from bwd_suite.reports.items import Items, case_label, style, verdict_order
from bwd_suite.suite.outcomes import Determinism, Verdict

UNSTABLE = (Determinism.NONDETERMINISTIC, Determinism.FAIL)  # marked in the matrix


@dataclass(frozen=True)
class Cell:
    verdict: str
    symbol: str
    href: str
    title: str
    nondeterministic: bool  # repeats differed (within tolerance or not)
    state: str = ""  # "known": a declared failure that failed; "xpass": one that passed


@dataclass(frozen=True)
class Row:
    case_id: str
    label: str
    cells: tuple  # Optional[Cell] per implementation of the op


@dataclass(frozen=True)
class Tally:
    verdict: str
    symbol: str
    n: int


@dataclass(frozen=True)
class Group:
    op: str
    name: str
    anchor: str
    n_cases: int
    open: bool  # something other than pass inside
    tallies: tuple  # (implementation, tuple of Tally over its non-zero verdicts)
    rows: tuple
    n_hidden: int  # cases not listed
    hidden_tallies: tuple  # Tally over the hidden items


@dataclass(frozen=True)
class OpMatrix:
    op: str
    impls: tuple
    groups: tuple

    @property
    def ncols(self) -> int:
        return len(self.impls) + 1


def _tallies(counts: dict) -> tuple:
    """Tally per verdict present, in display order, from {verdict: n}."""
    return tuple(Tally(v, style(v).symbol, int(counts[v]))
                 for v in verdict_order(counts) if counts.get(v, 0))


def _counts(series) -> dict:
    """{key tuple: {verdict: n}} from a value_counts over (..., verdict)."""
    out: dict = {}
    for key, n in series.items():
        out.setdefault(key[:-1], {})[key[-1]] = n
    return out


def _cell(r) -> Cell:
    s = style(r.verdict)
    href = f"#f{r.anchor}" if r.entry else f"#{r.anchor}"
    title = f"{r.impl}: {r.verdict}" + (f" ({r.failure_kind})" if r.bad and
                                        isinstance(r.failure_kind, str) else "")
    state = "known" if r.expected else ("xpass" if r.xpass else "")
    if state == "known":
        title += f"; known failure (expected): {r.known}"
    elif state == "xpass":
        title += f"; unexpected pass: declared to fail ({r.known})"
    return Cell(r.verdict, s.symbol, href, title, r.determinism in UNSTABLE, state)


CELL_COLUMNS = ["op", "case_group", "case_id", "impl", "verdict", "anchor", "bad", "entry",
                "failure_kind", "determinism", "expected", "xpass", "known"]


def build(items: Items) -> tuple:
    rows = items.rows
    # every count in one grouped pass: a nightly run holds tens of thousands of items
    per_impl = _counts(rows.groupby(["op", "case_group", "impl"])["verdict"].value_counts())
    hidden = rows[~rows["shown"]]
    hidden_counts = _counts(hidden.groupby(["op", "case_group"])["verdict"].value_counts())
    n_hidden = hidden.groupby(["op", "case_group"])["case_id"].nunique().to_dict()
    n_cases = rows.groupby(["op", "case_group"])["case_id"].nunique().to_dict()
    attention = rows[(rows["verdict"] != Verdict.PASS) | rows["xpass"]]
    not_pass = attention.groupby(["op", "case_group"]).size().to_dict()
    cells: dict = {}  # (op, group) -> case -> {impl: Cell}, in listing order
    shown = items.shown.sort_values("case_rank", kind="stable")
    for r in shown[CELL_COLUMNS].itertuples(index=False):
        cells.setdefault((r.op, r.case_group), {}).setdefault(r.case_id, {})[r.impl] = _cell(r)
    out = []
    for k, op in enumerate(items.ops()):
        impls = items.impls(op)
        groups = []
        for gi, group in enumerate(items.groups(op)):
            key = (op, group)
            groups.append(Group(
                op=op, name=group, anchor=f"m-{k}-{gi}", n_cases=n_cases[key],
                open=key in not_pass,
                tallies=tuple((i, t) for i in impls
                              for t in [_tallies(per_impl.get((op, group, i), {}))] if t),
                rows=tuple(Row(c, case_label(op, group, c), tuple(by_impl.get(i) for i in impls))
                           for c, by_impl in cells.get(key, {}).items()),
                n_hidden=n_hidden.get(key, 0),
                hidden_tallies=_tallies(hidden_counts.get(key, {}))))
        out.append(OpMatrix(op=op, impls=tuple(impls), groups=tuple(groups)))
    return tuple(out)
