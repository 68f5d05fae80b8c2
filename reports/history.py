"""History across nightly runs (`report --history DIR`): per (op, case, implementation),
its median time and verdict over the runs, drawn as a small inline-SVG trend on a time
axis (reports.trend) with the detected steps marked by the commit range they fall in.

Runs are ordered by `run_started`. An item's trend holds the runs that timed it on the
device and after the kind of L2 flush of its latest timed run (timings of other devices
or flushes are not comparable: their dots sit on the floor of the trend, untimed). Steps
are found by suite.regression.detect_steps with the report's rule: a change-point where
the median of the runs' medians after it differs from the median before it by more than
the factor and a Mann-Whitney U test of the pooled samples after against before gives
p < alpha (the best-fitting such split first; binary segmentation: each side of a step is
searched again). A verdict that differs from the item's verdict in the run before is a
verdict change; a failure the implementation declares (`known_failure`) is expected, as
everywhere in the report.

The order of the listing (ORDER): new failures and unexpected passes first (they fail the
gate), then items with steps by the size of their largest step weighted by its
significance, then the other verdict changes; the most recent change first among equals.
A step's weight is |ln ratio| x min(-log10 p, P_CAP), times the share of its runs whose
timing is not noise (suite.regression's limits: spread past MAX_SPREAD, or a CPU run's
host load past MAX_HOST_LOAD): a loaded CPU night that doubles a time once cannot sort
above a real slowdown that several quiet nights agree on. The page lists every changed
item up to MAX_CHANGED and, folded, the first unchanged ones up to LIST_BUDGET trends.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence

import pandas as pd

from bwd_suite.reports import fmt, palette, trend
from bwd_suite.reports.items import case_label, compute_bound
from bwd_suite.reports.trend import Dot, Mark, Spark
from bwd_suite.suite.outcomes import BAD_VERDICTS, Verdict
from bwd_suite.suite.regression import (Rule, _plain, _side_noise, detect_steps, kept_samples,
                                        latest_rows, median_of)

COLUMNS = ["run_id", "run_started", "git_commit", "device_name", "op", "case_id",
           "case_group", "impl", "verdict", "known_failure", "time_median_s",
           "time_samples_s", "l2_flush", "bound", "tflops", "frac_peak_flops", "time_iqr_s",
           "timing_method", "host_load"]
MAX_CHANGED = 300  # changed items listed
LIST_BUDGET = 500  # trends listed in all (changed first, then unchanged, folded)
# -log10 p beyond this adds no weight: past it every step is beyond doubt, and its size
# decides (a GPU step over nights of 100 samples gives p below 1e-60; one CPU night of 8
# samples against seven gives about 1e-9, four against four about 1e-18)
P_CAP = 20.0
ORDER = ("new failures and unexpected passes first, then steps by size weighted by "
         "significance (|ln ratio| × min(−log10 p, 20), times the share of the step's runs "
         "whose timing is not noise: spread or a CPU host's load past the comparison's "
         "limits), then the other verdict changes; the most recent change first among equals")
VERDICT_COLORS = {Verdict.FAIL: "#b3261e", Verdict.ERROR: "#7b1fa2",
                  Verdict.TIMEOUT: "#b35c00", Verdict.UNSUPPORTED: "#9aa3ab",
                  Verdict.WEAK_YARDSTICK: "#8a6d00"}
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
    started_iso: str = ""  # run_started as recorded: the time axis

    @property
    def short_commit(self) -> str:
        """Its commit ("a+b" for a run of several), "?" when the files hold none."""
        return "+".join(c.strip() for c in self.commit.split(",")) if self.commit else "?"


def commit_range(before: Run, after: Run) -> str:
    """The commits a change happened between, as `git log` takes them."""
    if "?" in (before.short_commit, after.short_commit):
        return f"{before.short_commit}..{after.short_commit} (a commit unknown)"
    if before.short_commit == after.short_commit:
        return f"{after.short_commit} (the same commit: no code change)"
    return f"{before.short_commit}..{after.short_commit}"


@dataclass(frozen=True)
class StepRow:
    run: int  # index of the first run after the step
    started: str
    before: fmt.Num
    after: fmt.Num
    ratio: fmt.Num
    p: fmt.Num
    slower: bool
    prev_run: int = -1  # index of the last timed run before the step
    commits: str = ""  # the commit range it happened in
    noise: str = ""  # why some of its runs' timings are noise ("" when none is)
    weight: float = 0.0  # its size weighted by its significance (ORDER)


@dataclass(frozen=True)
class VerdictStep:
    run: int
    started: str
    before: str  # the verdicts as shown: "fail (expected)" for a declared failure
    after: str
    prev_run: int = -1
    commits: str = ""
    gate: bool = False  # it ends in a new failure or an unexpected pass


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
    expected: bool = False  # the latest verdict is a failure its implementation declares
    unexpected_pass: bool = False  # ... or a declared failure that passed
    weight: float = 0.0  # of its weightiest step (ORDER)
    rank: int = 2  # 0: a new failure or unexpected pass, 1: a step of weight, 2: other


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
    order: str = ORDER

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
    noise: str = ""  # why this run's timing is noise, "" when it is not

    @property
    def expected(self) -> bool:
        return bool(self.known) and self.verdict in BAD_VERDICTS

    @property
    def unexpected_pass(self) -> bool:
        return bool(self.known) and self.verdict == Verdict.PASS

    @property
    def shown_verdict(self) -> str:
        return self.verdict + (" (expected)" if self.expected else
                               " (unexpected pass)" if self.unexpected_pass else "")


def _noise(iqr, median, method, load) -> str:
    """Why a run's timing of an item means nothing (the comparison's limits), or ""."""
    if median is None:
        return ""
    found = _side_noise("run", fmt.value(iqr), median, method, fmt.value(load))
    return "; ".join(f"{n.what} {n.value:.3g}" for n in found)


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
                     d["frac_peak_flops"], d["time_iqr_s"], d["timing_method"],
                     d["host_load"]):
            key = (str(r[0]), str(r[1]), str(r[2]))
            groups.setdefault(key, _text(r[3]))
            samples = kept_samples(r[7])
            med = median_of(r[6], r[7]) if samples or fmt.value(r[6]) else None
            rate = (fmt.value(r[11]), fmt.value(r[12])) \
                if compute_bound(r[10]) and fmt.value(r[11]) is not None else None
            series.setdefault(key, []).append(
                _Point(k, str(r[4]), _text(r[5]), med, samples, _text(r[8]), _text(r[9]),
                       rate, _noise(r[13], med, r[14], r[15])))
    return series, groups


def _dot_color(p: _Point, impl_color: str) -> str:
    if p.expected:
        return KNOWN_COLOR
    return VERDICT_COLORS.get(p.verdict, impl_color)


def _spark(points: list, timed: list, steps: list, vchanges: list, color: str,
           runs: tuple, rule: Rule) -> Spark:
    xs = trend.x_positions([trend.timestamp(r.started_iso) for r in runs])
    scale = trend.Scale.of([p.median for p in timed], 2 * math.log(max(rule.factor, 1.01))) \
        if timed else None
    timed_runs = {p.run for p in timed}
    dots = []
    for p in points:
        is_timed = p.run in timed_runs
        run = runs[p.run]
        title = (f"{run.started}, commit {run.short_commit}: {p.shown_verdict}"
                 + (f", {fmt.time_text(p.median)}" if is_timed else ", not timed alike")
                 + (f" (noise: {p.noise})" if is_timed and p.noise else ""))
        dots.append(Dot(xs[p.run], scale.y(p.median) if is_timed else trend.FLOOR,
                        _dot_color(p, color), title, is_timed))
    line = " ".join(f"{d.x},{d.y}" for d in dots if d.timed)
    marks = []
    for s in steps:
        marks.append(Mark(round((xs[s.prev_run] + xs[s.run]) / 2, 1),
                          "slower" if s.slower else "faster",
                          f"step {s.ratio.text} ({'slower' if s.slower else 'faster'}) between "
                          f"run {s.prev_run + 1} ({runs[s.prev_run].started}) and run "
                          f"{s.run + 1} ({runs[s.run].started}): commits {s.commits}, "
                          f"p = {s.p.text}" + (f"; noise: {s.noise}" if s.noise else "")))
    for v in vchanges:
        marks.append(Mark(round((xs[v.prev_run] + xs[v.run]) / 2, 1), "verdict",
                          f"{v.before} → {v.after} between run {v.prev_run + 1} and run "
                          f"{v.run + 1} ({v.started}): commits {v.commits}"))
    return Spark(trend.WIDTH, trend.HEIGHT, line, tuple(dots), tuple(marks), trend.FLOOR,
                 ticks=trend.ticks([r.started_iso for r in runs], xs),
                 scale=scale.labels() if scale else ())


def _weight(step, noise: float) -> float:
    """A step's size weighted by its significance (ORDER); `noise`: the share of its runs
    whose timing is noise, on its noisier side."""
    significance = P_CAP if step.p <= 0 else min(-math.log10(step.p), P_CAP)
    return abs(math.log(step.ratio)) * significance * (1.0 - noise)


def _step_rows(found: list, timed: list, runs: tuple) -> tuple:
    """StepRow per detected step: its commit range, and its runs' noise: of the timed
    runs from the step before it to the step after it, the share that is noise on its
    noisier side (a step made by one loaded night has a side all noise)."""
    cuts = [0] + [s.index for s in found] + [len(timed)]
    rows = []
    for k, s in enumerate(found):
        before, after = timed[cuts[k]:s.index], timed[s.index:cuts[k + 2]]
        noisy = [p.noise for p in before + after if p.noise]
        share = max(sum(bool(p.noise) for p in side) / len(side) for side in (before, after))
        prev, cur = timed[s.index - 1].run, timed[s.index].run
        rows.append(StepRow(cur, runs[cur].started, fmt.seconds(s.before_s),
                            fmt.seconds(s.after_s), fmt.times(s.ratio), fmt.pvalue(s.p),
                            s.slower, prev, commit_range(runs[prev], runs[cur]),
                            noisy[0] if noisy else "", _weight(s, share)))
    return tuple(rows)


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
    vchanges = tuple(
        VerdictStep(b.run, runs[b.run].started, a.shown_verdict, b.shown_verdict, a.run,
                    commit_range(runs[a.run], runs[b.run]),
                    b.unexpected_pass or (b.verdict in BAD_VERDICTS and not b.expected))
        for a, b in zip(points, points[1:]) if a.shown_verdict != b.shown_verdict)
    steps = _step_rows(found, timed, runs)
    last, text = -1, ""
    for s in steps:
        if s.run >= last:
            last = s.run
            text = f"{s.ratio.text} {'slower' if s.slower else 'faster'} in {s.commits}"
    for v in vchanges:
        if v.run >= last:
            last = v.run
            text = f"{v.before} → {v.after} in {v.commits}"
    weight = max((s.weight for s in steps), default=0.0)
    latest = points[-1]
    # a new failure or unexpected pass that still stands (no change after it) comes first:
    # it fails the gate
    gate = bool(vchanges) and vchanges[-1].gate
    rate = timed[-1].rate if timed else None
    return Trend(op=op, case_id=case_id,
                 label=f"{group}/{case_label(op, group, case_id)}" if group else case_id,
                 impl=impl, color=color, n_runs=len(points), n_timed=len(timed),
                 latest=fmt.seconds(timed[-1].median if timed else None),
                 latest_tflops=fmt.rate(rate[0] if rate else None),
                 latest_frac_peak=fmt.percent(rate[1] if rate else None),
                 verdict=latest.verdict, steps=steps, verdict_changes=vchanges,
                 last_change=last, last_text=text,
                 spark=_spark(points, timed, steps, vchanges, color, runs, rule)
                 if draw else None,
                 expected=latest.expected, unexpected_pass=latest.unexpected_pass,
                 weight=weight, rank=0 if gate else 1 if weight > 0 else 2)


def order_key(t: Trend) -> tuple:
    """ORDER: gate first, then the weightiest step, then the most recent change."""
    return t.rank, -t.weight, -t.last_change, t.op, t.case_id, t.impl


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
                         ", ".join(commits), ", ".join(devices), fmt.count(len(df)),
                         _started(df)))
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
    changed = sorted((t for t in scored if t.last_change >= 0), key=order_key)
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
