"""One detail row per listed item, the target of its matrix cell: the output closest
to its tolerance (err / allowed, the headroom of a pass), determinism, median time (and a
compute-bound item's TFLOP/s and fraction of the compute peak), the op's statistics of
the item where it declares some (stats_json) and what the implementation reported about it
(impl_facts_json: an epilogue, an algorithm), and links on to the failure entry and the
roofline row."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pandas as pd

from bwd_suite.reports import fmt, outputs
from bwd_suite.reports.items import Items, case_label, compute_bound
from bwd_suite.suite.outcomes import Verdict


@dataclass(frozen=True)
class Detail:
    anchor: str
    label: str
    case_id: str
    impl: str
    verdict: str
    failure_kind: str
    worst_output: str
    worst_over: fmt.Num  # err / allowed of worst_output
    determinism: str
    det_spread: fmt.Num
    median: fmt.Num
    note: str  # the reason of a non-passing item without a failure entry, shortened
    failure_href: str  # "" without a failure entry
    roofline_href: str  # "" when untimed
    # the op's statistics (OpSpec.case_stats): name -> number, or "error" -> its message;
    # then what the implementation reported (suite/facts.py): name -> number or text
    stats: dict = field(default_factory=dict)
    # a compute-bound item's TFLOP/s and fraction of the compute peak (missing otherwise)
    tflops: fmt.Num = fmt.NONE
    frac_peak: fmt.Num = fmt.NONE


@dataclass(frozen=True)
class DetailGroup:
    op: str
    group: str
    rows: tuple

    @property
    def has_stats(self) -> bool:
        return any(d.stats for d in self.rows)


COLUMNS = ["op", "case_group", "case_id", "impl", "verdict", "failure_kind", "outputs",
           "determinism", "det_spread", "time_median_s", "timed", "entry", "anchor", "reason",
           "expected", "xpass", "known", "stats_json", "impl_facts_json", "bound", "tflops",
           "frac_peak_flops"]
NOTE_CHARS = 240  # the failure entry holds the whole reason


def _note(reason) -> str:
    text = "" if reason is None or pd.isna(reason) else str(reason)
    return text if len(text) <= NOTE_CHARS else text[:NOTE_CHARS - 1] + "…"


def _stats(text) -> dict:
    """stats_json as {name: fmt.Num}, a message as itself; {} when the row has none."""
    if not isinstance(text, str) or not text:
        return {}
    try:
        stats = json.loads(text)
    except ValueError:
        return {"error": f"unreadable statistics: {text[:NOTE_CHARS]}"}
    if not isinstance(stats, dict):
        return {"error": f"statistics not an object: {text[:NOTE_CHARS]}"}
    return {str(k): _note(v) if isinstance(v, str)
            else fmt.count(v) if isinstance(v, int) and not isinstance(v, bool)
            else fmt.sig(v) for k, v in stats.items()}


def _detail(r) -> Detail:
    name, over = outputs.worst(r.outputs)
    compute = bool(r.timed) and compute_bound(r.bound)
    return Detail(
        anchor=r.anchor, label=case_label(r.op, r.case_group, r.case_id), case_id=r.case_id,
        impl=r.impl, verdict=r.verdict,
        failure_kind="" if pd.isna(r.failure_kind) else str(r.failure_kind),
        worst_output=name or "", worst_over=fmt.times(over), determinism=str(r.determinism),
        det_spread=fmt.sig(r.det_spread),
        median=fmt.seconds(r.time_median_s if r.timed else None),
        note=_note(f"known failure (expected): {r.known}. {_note(r.reason)}") if r.expected
        else _note(f"unexpected pass: declared to fail: {r.known}") if r.xpass
        else _note(r.reason) if r.verdict != Verdict.PASS and not r.entry else "",
        failure_href=f"#f{r.anchor}" if r.entry else "",
        roofline_href=f"#r{r.anchor}" if r.timed else "",
        stats={**_stats(r.stats_json), **_stats(r.impl_facts_json)},
        tflops=fmt.rate(r.tflops if compute else None),
        frac_peak=fmt.percent(r.frac_peak_flops if compute else None))


def build(items: Items) -> tuple:
    by_group: dict = {}
    shown = items.shown.sort_values("case_rank", kind="stable")
    for r in shown[COLUMNS].itertuples(index=False):
        by_group.setdefault((r.op, r.case_group), []).append(_detail(r))
    return tuple(DetailGroup(op, g, tuple(by_group[(op, g)]))
                 for op in items.ops() for g in items.groups(op) if (op, g) in by_group)
