"""The training-step scenarios' section (suite/step/, docs/step.md): per scenario its checks'
verdicts by choice of backwards, a stacked bar per (choice, measured step: plain,
checkpointed, offloaded) of the median time of each stage (forward, loss, backward,
optimizer), the stages' FLOPs and kernel launches, and the memory ledger by state class,
measured beside its model (x1: as modelled)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Optional

from bwd_suite.reports import chart, fmt, palette
from bwd_suite.reports.items import Items
from bwd_suite.suite.profiles import STEP_KIND

STAGES = ("forward", "loss", "backward", "optimizer")
# one fixed colour per stage, from the palette (each stage is a series of every bar)
STAGE_COLORS = {"forward": palette.PALETTE[0], "loss": palette.PALETTE[7],
                "backward": palette.PALETTE[19], "optimizer": palette.PALETTE[4]}
VARIANTS = {"float64": "plain", "checkpoint": "checkpointed", "offload": "offloaded"}
CLASSES = ("parameters", "gradients", "optimizer_state", "saved_activations", "temporaries",
           "workspace")


@dataclass(frozen=True)
class Stage:
    name: str
    time: fmt.Num  # median milliseconds
    flops: fmt.Num
    launches: fmt.Num


@dataclass(frozen=True)
class StageRow:
    impl: str
    variant: str
    color: str  # the implementation's colour
    stages: tuple  # Stage per STAGES
    total: fmt.Num
    note: str  # the recompute check, or why the row has no measurement


@dataclass(frozen=True)
class LedgerClass:
    name: str
    measured: fmt.Num
    analytic: fmt.Num
    ratio: fmt.Num  # measured / analytic


@dataclass(frozen=True)
class LedgerRow:
    impl: str
    variant: str
    color: str
    classes: tuple  # LedgerClass per CLASSES
    saved_after_forward: fmt.Num
    peak: fmt.Num  # the allocator's (CUDA) or the tracked one


@dataclass(frozen=True)
class Check:
    impl: str
    name: str
    verdict: str
    expected: bool  # a declared failure
    reason: str


@dataclass(frozen=True)
class ScenarioSection:
    name: str
    chart: Optional[chart.Stacked]
    stage_rows: tuple
    ledger_rows: tuple
    checks: tuple
    launches: bool  # some stage counted its kernels (CUDA): the table shows them


COLUMNS = ["case_group", "case_id", "impl", "verdict", "known_failure", "reason",
           "stages_json", "ledger_json"]


def _json(text) -> dict:
    if not isinstance(text, str):
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {"error": f"unreadable: {text[:200]}"}
    return value if isinstance(value, dict) else {"error": f"not an object: {text[:200]}"}


def _stage_row(impl: str, variant: str, color: str, st: dict) -> StageRow:
    if "error" in st:
        return StageRow(impl, variant, color, (), fmt.NONE, f"not measured: {st['error']}"[:300])
    per = st.get("stages", {})
    stages = tuple(Stage(k, fmt.millis(per.get(k, {}).get("time_ms")),
                         fmt.nflops(per.get(k, {}).get("flops")),
                         fmt.count(per.get(k, {}).get("launches"))) for k in STAGES)
    total = sum(fmt.value(per.get(k, {}).get("time_ms")) or 0.0 for k in STAGES)
    again = st.get("recompute")
    note = ""
    if again:
        note = (f"backward recomputes {fmt.flops_text(again['recomputed_flops'])} of forward "
                f"FLOPs: " + ("exactly the checkpointed layers'" if again.get("exact") else
                              f"expected {again['expected_backward_flops']:,}, counted "
                              f"{again['backward_flops']:,}"))
    return StageRow(impl, variant, color, stages, fmt.millis(total), note)


def _ledger_row(impl: str, variant: str, color: str, led: dict) -> Optional[LedgerRow]:
    if not led or "error" in led:
        return None
    m, a = led.get("measured", {}), led.get("analytic", {})
    classes = []
    for k in CLASSES:
        got, model = fmt.value(m.get(k)), fmt.value(a.get(k))
        # the saved activations' model is what the graph keeps as the backward starts
        if k == "saved_activations":
            got = fmt.value(led.get("saved_after_forward"))
        classes.append(LedgerClass(k, fmt.nbytes(got), fmt.nbytes(model),
                                   fmt.times(got / model if got is not None and model
                                             else None)))
    peak = led.get("allocator_peak") or led.get("tracked_peak")
    return LedgerRow(impl, variant, color, tuple(classes),
                     fmt.nbytes(led.get("saved_after_forward")), fmt.nbytes(peak))


def _bar(r: StageRow) -> chart.StackRow:
    segs = tuple(chart.StackPart(s.name, fmt.value(s.time.raw) or 0.0,
                               f"{r.impl} {r.variant}: {s.name} {s.time.text}, "
                               f"{s.flops.text} FLOPs, {s.launches.text} launches")
                 for s in r.stages)
    return chart.StackRow(f"{r.impl} {r.variant}", segs, r.total.text)


def build(items: Items, colors: Optional[dict] = None) -> tuple:
    rows = items.rows[items.rows["op"] == STEP_KIND] if "op" in items.rows else items.rows[:0]
    if rows.empty:
        return ()
    colors = palette.colors(rows["impl"]) if colors is None else colors
    out = []
    for name in dict.fromkeys(rows["case_group"]):
        sub = rows[rows["case_group"] == name]
        stage_rows, ledger_rows, checks = [], [], []
        for r in sub[COLUMNS].itertuples(index=False):
            check = r.case_id.rsplit("/", 1)[-1]
            checks.append(Check(r.impl, check, str(r.verdict),
                                isinstance(r.known_failure, str) and bool(r.known_failure),
                                str(r.reason or "")[:400]))
            if check not in VARIANTS or not isinstance(r.stages_json, str):
                continue
            color = palette.color(colors, r.impl)
            stage_rows.append(_stage_row(r.impl, VARIANTS[check], color, _json(r.stages_json)))
            led = _ledger_row(r.impl, VARIANTS[check], color, _json(r.ledger_json))
            if led:
                ledger_rows.append(led)
        drawn = chart.stacked([_bar(r) for r in stage_rows if r.stages], STAGE_COLORS,
                              "median time of each stage of one step",
                              lambda ms: fmt.time_text(ms / 1e3),
                              f"{name}: the median time of each stage of one step, per "
                              f"choice of backwards and measured step")
        launches = any(not st.launches.missing for r in stage_rows for st in r.stages)
        out.append(ScenarioSection(name, drawn, tuple(stage_rows), tuple(ledger_rows),
                                   tuple(checks), launches))
    return tuple(out)
