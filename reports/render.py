"""Assembles the report from results DataFrames and renders it to one HTML file, or its
data to one JSON document.

`build` computes every section (one module each) into frozen dataclasses; `render`
lays them out with the jinja2 templates in reports/templates/, autoescaping everything;
`to_json` writes the same dataclasses as JSON (numbers at full precision, no geometry).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import json
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional, Sequence

import jinja2
import pandas as pd
from markupsafe import Markup

from bwd_suite.reports import (changes, details, failures, fmt, headline, history, items, known,
                               ledger, matrix, palette, roofline, sections, speedup, summary)
from bwd_suite.reports import coverage, steps
from bwd_suite.suite.regression import Rule, compare

TEMPLATES = Path(__file__).resolve().parent / "templates"
SCRIPT = TEMPLATES / "page.js"  # the page's only script: folds, filter, sort; inline
DEFAULT_CAP = 100  # cases listed per (op, sweep)


class Level(enum.Enum):
    INFO = "info"
    WARN = "warn"


@dataclass(frozen=True)
class Notice:
    level: Level
    text: str


@dataclass(frozen=True)
class Options:
    # for the side-by-side speedups: a name, "op=impl,..." or a speedup.BaselineChoice
    baseline_impl: object = None
    rule: Rule = field(default_factory=Rule)
    cap: int = DEFAULT_CAP
    title: str = "bwd-suite report"
    # (label, results frame) per earlier run for the history section; () for none
    history: tuple = ()


@dataclass(frozen=True)
class Report:
    title: str
    generated: str
    sources: tuple
    baseline_sources: tuple
    notices: tuple
    summary: summary.Summary
    matrix: tuple
    failures: failures.Failures
    roofline: tuple
    speedup: tuple
    changes: Optional[changes.Changes]  # None without a usable baseline
    baseline_given: bool
    details: tuple
    cap: int
    known: Optional[known.Known] = None
    weak: Optional[known.Known] = None  # the items as weak as the yardstick, listed apart
    history: Optional[history.History] = None  # None without --history
    colors: dict = field(default_factory=dict)  # implementation -> colour (reports.palette)
    coverage: Optional[coverage.Coverage] = None  # values and value pairs per implementation
    # one line per results file whose run did not finish its plan: the page's first words
    incomplete: tuple = ()
    ledger: tuple = ()  # ledger.OpLedger per op that declares memory bounds
    steps: tuple = ()  # steps.ScenarioSection per training-step scenario
    headline: Optional[headline.Headline] = None  # the first screen: verdict and identity


def _notices(its: items.Items, comparison, baseline_given: bool, speed) -> list:
    out = []
    if its.n_duplicates:
        out.append(Notice(Level.INFO, f"{its.n_duplicates} rows repeat an item of a later run "
                                      f"and were left out (the latest run's row is used)."))
    hidden = its.rows.loc[~its.rows["shown"], ["op", "case_id"]].drop_duplicates()
    if len(hidden):
        out.append(Notice(Level.INFO,
                          f"Each sweep lists its failing cases first and at most {its.cap} "
                          f"cases (fewer when it has many implementations, to keep the page "
                          f"readable): {len(hidden):,} cases are not listed. Counts, geometric "
                          f"means and the comparison with the baseline use every row."))
    if not its.rows["timed"].any():
        out.append(Notice(Level.INFO, "These results hold no timings (run without "
                                      "--no-timing for the roofline and speed sections)."))
    if baseline_given and comparison is not None and not comparison.overlaps:
        out.append(Notice(Level.WARN, "The baseline shares no (op, case, implementation) "
                                      "with these results: there is nothing to compare."))
    if comparison is not None and comparison.overlaps and comparison.env_differences:
        out.append(Notice(Level.WARN, "The baseline ran in another environment ("
                          + "; ".join(comparison.env_differences)
                          + "): timing changes may come from it."))
    if comparison is not None and comparison.n_flush_differs:
        out.append(Notice(Level.WARN, f"{comparison.n_flush_differs} items were timed after "
                          "another kind of L2 flush in the baseline (l2_flush): their "
                          "timings are not compared."))
    if comparison is not None and comparison.n_device_differs:
        out.append(Notice(Level.WARN, f"{comparison.n_device_differs} items were timed on "
                          "another device in the baseline (device_name): their timings are "
                          "not compared."))
    if comparison is not None and comparison.overlaps and comparison.vacuous_reason:
        out.append(Notice(Level.WARN, "No timed item could be compared with the baseline: "
                          + comparison.vacuous_reason + "."))
    if its.rows["xpass"].any():
        n = int(its.rows["xpass"].sum())
        out.append(Notice(Level.WARN, f"{n} unexpected pass{'es' * (n != 1)}: items declared "
                          "to fail (known_failure) passed; their declarations are out of "
                          "date (see the summary)."))
    out += [Notice(Level.WARN, f"--baseline-impl {s.requested!r} has no timed results for "
                               f"{s.op}: its speedups are against {s.baseline!r}.")
            for s in speed if s.fallback]
    return out


def _impl_names(*frames) -> list:
    names = set()
    for df in frames:
        if df is not None and "impl" in df:
            names |= set(map(str, df["impl"].dropna().unique()))
    return sorted(names)


def build(current: pd.DataFrame, baseline: Optional[pd.DataFrame] = None,
          options: Options = Options(), sources: Sequence[str] = (),
          baseline_sources: Sequence[str] = (), incomplete: Sequence[str] = ()) -> Report:
    """The report of `current` (against `baseline`); `incomplete`: a line per results file
    whose run did not finish its plan (suite.results.completeness)."""
    its = items.select(current, options.cap)
    comparison = compare(baseline, current, options.rule) if baseline is not None else None
    speed = speedup.build(its, options.baseline_impl, options.rule.alpha)
    runs = list(options.history)
    colors = palette.colors(_impl_names(current, baseline, *(df for _, df in runs)))
    hist = None
    if runs:
        seen = set().union(*(set(map(str, df["run_id"])) for _, df in runs))
        if not set(map(str, current["run_id"])) <= seen:  # tonight's run, as the last point
            runs.append(("the report's results", current))
        hist = history.build(runs, options.rule, colors)
    chg = changes.build(comparison, (items.compute_rates(baseline),
                                     items.compute_rates(current))) \
        if comparison and comparison.overlaps else None
    return Report(
        title=options.title,
        generated=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        sources=tuple(map(str, sources)), baseline_sources=tuple(map(str, baseline_sources)),
        notices=tuple(_notices(its, comparison, baseline is not None, speed)),
        summary=summary.build(its, current),
        matrix=matrix.build(its),
        failures=failures.build(its),
        roofline=roofline.build(its, colors),
        speedup=speed,
        changes=chg,
        baseline_given=baseline is not None,
        details=details.build(its),
        cap=options.cap,
        known=known.build(its),
        weak=known.weak(its),
        history=hist,
        colors=colors,
        coverage=coverage.build(current),
        incomplete=tuple(incomplete),
        ledger=ledger.build(its, colors),
        steps=steps.build(its, colors),
        headline=headline.build(its, chg, baseline is not None, current, baseline),
    )


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """One environment per process: it caches the compiled templates."""
    return jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                              undefined=jinja2.StrictUndefined, trim_blocks=True,
                              lstrip_blocks=True)


def render(report: Report) -> str:
    """The page: each section rendered on its own, so that its length decides whether it
    starts folded (reports/sections.py), then laid out in report.html.j2."""
    env = environment()
    parts = []
    for s in sections.build(report):
        body = Markup(env.get_template(s.template).render(r=report))
        parts.append((sections.folded(s, body), body))
    return env.get_template("report.html.j2").render(
        r=report, sections=parts, filters=sections.filters(report), script=_script())


@functools.lru_cache(maxsize=1)
def _script() -> Markup:
    """page.js as it goes inside <script>: read, not a template (its braces are code)."""
    text = SCRIPT.read_text(encoding="utf-8")
    assert "</" not in text, "page.js must not close its <script> element"
    return Markup(text)


GEOMETRY = frozenset({"chart", "compute_chart", "spark", "bars"})  # drawing coordinates, not data: left out of JSON


def data(obj):
    """A report (or any part of it) as plain JSON values: dataclasses as objects of their
    fields (drawing geometry left out), numbers (fmt.Num) as their full-precision value
    (null when missing or not finite), enums as their value."""
    if isinstance(obj, fmt.Num):
        if obj.missing:
            return None
        try:
            v = int(obj.raw)
        except ValueError:
            v = float(obj.raw)
        return v if math.isfinite(v) else None
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: data(getattr(obj, f.name)) for f in dataclasses.fields(obj)
                if f.name not in GEOMETRY}
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, dict):
        return {str(k): data(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [data(v) for v in obj]
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if obj is None or isinstance(obj, (str, int, bool)):
        return obj
    return str(obj)


def to_json(report: Report) -> str:
    """The report's data as one JSON document: summary counts, matrix, failures, known
    failures, the items as weak as the yardstick, roofline rows, memory ledger, speedups,
    changes (with every compared timing), history."""
    doc = {"format": "bwd-suite-report", "version": 1, **data(report)}
    return json.dumps(doc, indent=1, ensure_ascii=False, allow_nan=False)


FORMATS = ("html", "json")


def write(report: Report, path: Path, format: str = "html") -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = to_json(report) + "\n" if format == "json" else render(report)
    path.write_text(text, encoding="utf-8")
    return path
