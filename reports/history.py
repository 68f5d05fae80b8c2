"""History across nightly runs (`report --history DIR`): per (op, case, implementation),
its median time and verdict over the runs, drawn as a small inline-SVG trend line with
the detected steps marked, items with the most recent changes first.

Runs are ordered by `run_started`. An item's trend holds the runs that timed it on the
device and after the kind of L2 flush of its latest timed run (timings of other devices
or flushes are not comparable: their dots sit on the floor of the trend, untimed). Steps
are found by suite.regression.detect_steps with the report's rule: a change-point where
the median of the runs' medians after it differs from the median before it by more than
the factor and a Mann-Whitney U test of the pooled samples after against before gives
p < alpha (the best-fitting such split first; binary segmentation: each side of a step is
searched again). A verdict that
differs from the item's verdict in the run before is a verdict change. The page lists
every item with a step or a verdict change (up to MAX_CHANGED, most recent change first)
and, folded, the first unchanged items up to LIST_BUDGET trends in all.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence

import pandas as pd

from bwd_suite.reports import fmt, palette
from bwd_suite.reports.items import case_label, compute_bound
from bwd_suite.suite.outcomes import BAD_VERDICTS, Verdict
from bwd_suite.suite.regression import (Rule, _plain, detect_steps, kept_samples, latest_rows,
                              median_of)

COLUMNS = ["run_id", "run_started", "git_commit", "device_name", "op", "case_id",
           "case_group", "impl", "verdict", "known_failure", "time_median_s",
           "time_samples_s", "l2_flush", "bound", "tflops", "frac_peak_flops"]
MAX_CHANGED = 300  # changed items listed
LIST_BUDGET = 500  # trends listed in all (changed first, then unchanged, folded)
WIDTH, HEIGHT, PAD = 200, 40, 5
VERDICT_COLORS = {Verdict.FAIL: "#b3261e", Verdict.ERROR: "#7b1fa2",
                  Verdict.TIMEOUT: "#b35c00", Verdict.UNSUPPORTED: "#9aa3ab"}
KNOWN_COLOR = "#b08900"  # a declared known failure that failed
METHOD = ("a step is a change-point where the median of the runs' medians after it "
          "differs from the median before it by more than the factor and a two-sided "
          "Mann-Whitney U test of the pooled samples after against before gives p < alpha; "
          "of the candidate change-points the best fit of two constant levels is tried "
          "first, and each side of a step is searched again (binary segmentation); a single "
          "outlying run inside a stretch is no step, one at the end is")


@dataclass(frozen=True)
class Run:
    index: int
    label: str  # where it was read from
    started: str
    run_ids: str
    commit: str
    device: str
    items: fmt.Num


@dataclass(frozen=True)
class Dot:
    x: float
    y: float
    color: str
    title: str
    timed: bool


@dataclass(frozen=True)
class Mark:
    """A vertical mark across the trend: a timing step or a verdict change."""

    x: float
    kind: str  # "slower", "faster" or "verdict"
    title: str


@dataclass(frozen=True)
class Spark:
    width: int
    height: int
    line: str  # polyline points of the timed runs
    dots: tuple
    marks: tuple
    floor: float  # y of the untimed dots


@dataclass(frozen=True)
class StepRow:
    run: int  # index of the first run after the step
    started: str
    before: fmt.Num
    after: fmt.Num
    ratio: fmt.Num
    p: fmt.Num
    slower: bool


@dataclass(frozen=True)
class VerdictStep:
    run: int
    started: str
    before: str
    after: str


@dataclass(frozen=True)
class Trend:
    op: str
    case_id: str
    label: str
    impl: str
    color: str
    n_runs: int  # runs holding the item
    n_timed: int  # of those, timed as its latest timed run
    latest: fmt.Num  # the latest timed median
    verdict: str  # the latest verdict
    steps: tuple  # StepRow in run order
    verdict_changes: tuple  # VerdictStep in run order
    last_change: int  # run index of the latest step or verdict change; -1: none
    last_text: str  # that change in words
    spark: Optional[Spark]  # drawn for listed trends only
    # the latest timed run's TFLOP/s and fraction of the compute peak, where it was compute
    # bound (missing otherwise)
    latest_tflops: fmt.Num = fmt.NONE
    latest_frac_peak: fmt.Num = fmt.NONE


@dataclass(frozen=True)
class History:
    runs: tuple
    changed: tuple  # Trend, most recent change first (at most MAX_CHANGED)
    unchanged: tuple  # Trend without changes, listed folded
    n_items: int
    n_changed: int
    n_steps: int
    n_verdict_changes: int
    rule: str
    method: str = METHOD

    @property
    def n_changed_hidden(self) -> int:
        return self.n_changed - len(self.changed)

    @property
    def n_unchanged_hidden(self) -> int:
        return self.n_items - self.n_changed - len(self.unchanged)


def _text(v) -> str:
    return v if isinstance(v, str) else ""


def _started(df: pd.DataFrame) -> str:
    if "run_started" not in df:
        return ""
    s = df["run_started"].dropna()
    return str(s.min()) if len(s) else ""


def short_time(iso: str) -> str:
    """2026-11-29T21:44:04+00:00 as 2026-11-29 21:44 (runs start in UTC)."""
    return iso[:16].replace("T", " ") if len(iso) >= 16 else iso


def order_runs(runs: Sequence[tuple]) -> list:
    """(label, frame) pairs in order of run_started (their earliest), then label."""
    return sorted(runs, key=lambda lr: (_started(lr[1]), str(lr[0])))


@dataclass
class _Point:
    run: int
    verdict: str
    known: str
    median: Optional[float]
    samples: list
    device: str
    flush: str
    rate: Optional[tuple] = None  # (TFLOP/s, fraction of the peak) where compute bound


def _points(frames: list) -> tuple:
    """{(op, case_id, impl): [_Point per run holding it, in run order]}, plus
    {key: case_group}."""
    series: dict = {}
    groups: dict = {}
    for k, df in enumerate(frames):
        d = _plain(latest_rows(df.reindex(columns=COLUMNS)))  # plain strings: 20x faster
        for r in zip(d["op"], d["case_id"], d["impl"], d["case_group"], d["verdict"],
                     d["known_failure"], d["time_median_s"], d["time_samples_s"],
                     d["device_name"], d["l2_flush"], d["bound"], d["tflops"],
                     d["frac_peak_flops"]):
            key = (str(r[0]), str(r[1]), str(r[2]))
            groups.setdefault(key, _text(r[3]))
            samples = kept_samples(r[7])
            med = median_of(r[6], r[7]) if samples or fmt.value(r[6]) else None
            rate = (fmt.value(r[11]), fmt.value(r[12])) \
                if compute_bound(r[10]) and fmt.value(r[11]) is not None else None
            series.setdefault(key, []).append(
                _Point(k, str(r[4]), _text(r[5]), med, samples, _text(r[8]), _text(r[9]),
                       rate))
    return series, groups


def _dot_color(p: _Point, impl_color: str) -> str:
    if p.known and p.verdict in BAD_VERDICTS:
        return KNOWN_COLOR
    return VERDICT_COLORS.get(p.verdict, impl_color)


def _spark(points: list, timed: list, steps: list, vchanges: list, n_runs: int,
           color: str, runs: tuple, rule: Rule) -> Spark:
    def x_of(run: int) -> float:
        if n_runs < 2:
            return WIDTH / 2
        return round(PAD + run * (WIDTH - 2 * PAD) / (n_runs - 1), 1)

    logs = [math.log(p.median) for p in timed]
    floor = HEIGHT - PAD / 2
    if logs:
        lo, hi = min(logs), max(logs)
        span = max(hi - lo, 2 * math.log(max(rule.factor, 1.01)))
        bottom = (hi + lo) / 2 - span / 2

        def y_of(v: float) -> float:
            return round(PAD + (HEIGHT - 2 * PAD) * (1 - (math.log(v) - bottom) / span), 1)
    timed_runs = {p.run for p in timed}
    dots = []
    for p in points:
        is_timed = p.run in timed_runs
        title = (f"{runs[p.run].started}: {p.verdict}"
                 + (" (known failure)" if p.known and p.verdict in BAD_VERDICTS else "")
                 + (f", {fmt.time_text(p.median)}" if is_timed else ", not timed alike"))
        dots.append(Dot(x_of(p.run), y_of(p.median) if is_timed else floor,
                        _dot_color(p, color), title, is_timed))
    line = " ".join(f"{d.x},{d.y}" for d in dots if d.timed)
    marks = []
    for s in steps:
        prev = timed[s.index - 1].run
        cur = timed[s.index].run
        marks.append(Mark(round((x_of(prev) + x_of(cur)) / 2, 1),
                          "slower" if s.slower else "faster",
                          f"step ×{s.ratio:.3g} ({'slower' if s.slower else 'faster'}) at "
                          f"{runs[cur].started}, p = {s.p:.2g}"))
    for v in vchanges:
        prev = max(p.run for p in points if p.run < v.run)
        marks.append(Mark(round((x_of(prev) + x_of(v.run)) / 2, 1), "verdict",
                          f"{v.before} → {v.after} at {v.started}"))
    return Spark(WIDTH, HEIGHT, line, tuple(dots), tuple(marks), floor)


def _trend(key, group: str, points: list, runs: tuple, rule: Rule, colors: dict,
           draw: bool = False) -> Trend:
    op, case_id, impl = key
    color = palette.color(colors, impl)
    timed_all = [p for p in points if p.median]
    if timed_all:
        ref = timed_all[-1]
        timed = [p for p in timed_all if p.device == ref.device and p.flush == ref.flush]
    else:
        timed = []
    found = detect_steps([p.median for p in timed], [p.samples for p in timed], rule) \
        if len(timed) > 1 else []
    vchanges = [VerdictStep(b.run, runs[b.run].started, a.verdict, b.verdict)
                for a, b in zip(points, points[1:]) if a.verdict != b.verdict]
    steps = tuple(StepRow(timed[s.index].run, runs[timed[s.index].run].started,
                          fmt.seconds(s.before_s), fmt.seconds(s.after_s), fmt.times(s.ratio),
                          fmt.pvalue(s.p), s.slower) for s in found)
    last, text = -1, ""
    for s in steps:
        if s.run >= last:
            last = s.run
            text = f"{s.ratio.text} {'slower' if s.slower else 'faster'} at {s.started}"
    for v in vchanges:
        if v.run >= last:
            last = v.run
            text = f"{v.before} → {v.after} at {v.started}"
    rate = timed[-1].rate if timed else None
    return Trend(op=op, case_id=case_id,
                 label=f"{group}/{case_label(op, group, case_id)}" if group else case_id,
                 impl=impl, color=color, n_runs=len(points), n_timed=len(timed),
                 latest=fmt.seconds(timed[-1].median if timed else None),
                 latest_tflops=fmt.rate(rate[0] if rate else None),
                 latest_frac_peak=fmt.percent(rate[1] if rate else None),
                 verdict=points[-1].verdict, steps=steps, verdict_changes=tuple(vchanges),
                 last_change=last, last_text=text,
                 spark=_spark(points, timed, found, vchanges, len(runs), color, runs, rule)
                 if draw else None)


def build(runs: Sequence[tuple], rule: Rule = Rule(), colors: Optional[dict] = None) -> History:
    """`runs`: (label, results frame) per run, in any order (ordered here by
    run_started); `colors`: the page's implementation colours."""
    ordered = order_runs(runs)
    frames = [df for _, df in ordered]
    infos = []
    for k, (label, df) in enumerate(ordered):
        commits = sorted(set(map(str, df["git_commit"].dropna()))) if "git_commit" in df else []
        devices = sorted(set(map(str, df["device_name"].dropna()))) \
            if "device_name" in df else []
        ids = list(dict.fromkeys(map(str, df["run_id"]))) if "run_id" in df else []
        infos.append(Run(k, str(label), short_time(_started(df)), ", ".join(ids[:3])
                         + (f" and {len(ids) - 3} more" if len(ids) > 3 else ""),
                         ", ".join(commits), ", ".join(devices), fmt.count(len(df))))
    infos = tuple(infos)
    series, groups = _points(frames)
    colors = palette.colors(k[2] for k in series) if colors is None else colors
    scored = []
    n_steps = n_vchanges = 0
    for key, points in series.items():
        t = _trend(key, groups[key], points, infos, rule, colors)
        n_steps += len(t.steps)
        n_vchanges += len(t.verdict_changes)
        scored.append(t)
    changed = [t for t in scored if t.last_change >= 0]

    def size(t: Trend) -> float:
        at = [abs(math.log(float(s.ratio.raw))) for s in t.steps if s.run == t.last_change]
        return max(at, default=0.0)

    changed.sort(key=lambda t: (-t.last_change, not any(v.run == t.last_change
                                                        for v in t.verdict_changes),
                                -size(t), t.op, t.case_id, t.impl))
    unchanged = sorted((t for t in scored if t.last_change < 0),
                       key=lambda t: (t.op, t.case_id, t.impl))
    listed_changed = changed[:MAX_CHANGED]
    listed_unchanged = unchanged[:max(0, LIST_BUDGET - len(listed_changed))]

    def drawn(t: Trend) -> Trend:
        key = (t.op, t.case_id, t.impl)
        return _trend(key, groups[key], series[key], infos, rule, colors, draw=True)

    return History(runs=infos, changed=tuple(map(drawn, listed_changed)),
                   unchanged=tuple(map(drawn, listed_unchanged)), n_items=len(series),
                   n_changed=len(changed), n_steps=n_steps, n_verdict_changes=n_vchanges,
                   rule=rule.describe())
