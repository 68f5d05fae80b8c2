"""The memory ledger: per op that declares analytic bounds of its backward's temporary
memory (OpSpec.memory_bounds, stored per row in memory_bounds_json), a row per listed item
with the backward's peak (peak_mem_bytes: what the checked call allocated beyond its
inputs and outputs) and what its forward saved (saved_bytes), each divided by every
bound: x1 is as little as the bound allows, x3 three times that."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Optional

from bwd_suite.reports import fmt, palette
from bwd_suite.reports.items import Items, case_label

FIRST_ROWS = 40  # rows shown open, largest bound first; the rest fold


@dataclass(frozen=True)
class Bound:
    """One bound of one item, and the item's measurements against it."""

    name: str
    bytes: fmt.Num
    peak_ratio: fmt.Num  # peak_mem_bytes / bound
    saved_ratio: fmt.Num  # saved_bytes / bound


@dataclass(frozen=True)
class Row:
    anchor: str  # the item's roofline row ("" when untimed) or detail row
    label: str
    case_id: str
    impl: str
    color: str
    verdict: str
    peak: fmt.Num
    saved: fmt.Num
    bounds: tuple  # Bound per name of OpLedger.names (missing numbers where the item has none)
    note: str  # why the item has no bounds: the op's function raised, or they are unreadable


@dataclass(frozen=True)
class OpLedger:
    op: str
    names: tuple  # the bounds' names, in the op's order
    rows: tuple  # the first FIRST_ROWS
    more_rows: tuple  # the rest, folded

    @property
    def measured(self) -> bool:
        """Whether any row holds a peak or saved bytes (a CPU run holds neither)."""
        return any(not (r.peak.missing and r.saved.missing)
                   for r in self.rows + self.more_rows)


COLUMNS = ["op", "case_id", "case_group", "impl", "anchor", "verdict", "timed",
           "peak_mem_bytes", "saved_bytes", "memory_bounds_json"]


def parse(text) -> tuple:
    """({name: bytes}, note) of a memory_bounds_json value: the bounds, or none and why."""
    if not isinstance(text, str):
        return {}, ""
    try:
        value = json.loads(text)
    except ValueError:
        return {}, f"unreadable bounds: {text[:200]}"
    if not isinstance(value, dict):
        return {}, f"bounds not an object: {text[:200]}"
    if set(value) == {"error"}:
        return {}, f"the op's memory_bounds raised: {value['error']}"[:400]
    bounds = {str(k): fmt.value(v) for k, v in value.items()}
    return {k: v for k, v in bounds.items() if v is not None}, ""


def ratio(measured, bound: Optional[float]) -> fmt.Num:
    m = fmt.value(measured)
    return fmt.times(m / bound if m is not None and bound else None)


def build(items: Items, colors: Optional[dict] = None) -> tuple:
    """`colors`: the page's implementation colours (reports.palette)."""
    colors = palette.colors(items.rows["impl"]) if colors is None else colors
    out = []
    for op in items.ops():
        rows = items.shown[(items.shown["op"] == op)
                           & items.shown["memory_bounds_json"].notna()]
        if rows.empty:
            continue
        impls = items.impls(op)
        order = {i: k for k, i in enumerate(impls)}
        parsed = [parse(t) for t in rows["memory_bounds_json"]]
        names = tuple(dict.fromkeys(n for bounds, _ in parsed for n in bounds))
        largest = [max(bounds.values(), default=0.0) for bounds, _ in parsed]
        rows = rows.assign(parsed_bounds=parsed, _largest=largest, _impl=rows["impl"].map(order))
        rows = rows.sort_values(["_largest", "case_id", "_impl"], ascending=[False, True, True],
                                kind="stable")
        listed = []
        for r in rows[COLUMNS + ["parsed_bounds"]].itertuples(index=False):
            bounds, note = r.parsed_bounds
            listed.append(Row(
                anchor=f"#r{r.anchor}" if r.timed else f"#{r.anchor}",
                label=f"{r.case_group}/{case_label(op, r.case_group, r.case_id)}",
                case_id=r.case_id, impl=r.impl, color=palette.color(colors, r.impl),
                verdict=r.verdict, peak=fmt.nbytes(r.peak_mem_bytes),
                saved=fmt.nbytes(r.saved_bytes),
                bounds=tuple(Bound(n, fmt.nbytes(bounds.get(n)),
                                   ratio(r.peak_mem_bytes, bounds.get(n)),
                                   ratio(r.saved_bytes, bounds.get(n))) for n in names),
                note=note))
        cut = len(listed) if len(listed) <= FIRST_ROWS else next(
            (k for k in range(FIRST_ROWS, len(listed))
             if listed[k].case_id != listed[k - 1].case_id), len(listed))
        out.append(OpLedger(op=op, names=names, rows=tuple(listed[:cut]),
                            more_rows=tuple(listed[cut:])))
    return tuple(out)
