"""Assembles the report from results DataFrames and renders it to one HTML file.

`build` computes every section (one module each) into frozen dataclasses; `render`
lays them out with the jinja2 templates in reports/templates/, autoescaping everything.
"""

from __future__ import annotations

import enum
import functools
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional, Sequence

import jinja2
import pandas as pd

from reports import changes, details, failures, items, matrix, roofline, speedup, summary
from suite.regression import Rule, compare

TEMPLATES = Path(__file__).resolve().parent / "templates"
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
    baseline_impl: Optional[str] = None  # for the side-by-side speedups
    rule: Rule = field(default_factory=Rule)
    cap: int = DEFAULT_CAP
    title: str = "bwd-suite report"


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


def _notices(its: items.Items, comparison, baseline_given: bool, speed,
             requested: Optional[str]) -> list:
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
    out += [Notice(Level.WARN, f"--baseline-impl {requested!r} has no timed results for "
                               f"{s.op}: its speedups are against {s.baseline!r}.")
            for s in speed if s.fallback]
    return out


def build(current: pd.DataFrame, baseline: Optional[pd.DataFrame] = None,
          options: Options = Options(), sources: Sequence[str] = (),
          baseline_sources: Sequence[str] = ()) -> Report:
    its = items.select(current, options.cap)
    comparison = compare(baseline, current, options.rule) if baseline is not None else None
    speed = speedup.build(its, options.baseline_impl, options.rule.alpha)
    return Report(
        title=options.title,
        generated=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        sources=tuple(map(str, sources)), baseline_sources=tuple(map(str, baseline_sources)),
        notices=tuple(_notices(its, comparison, baseline is not None, speed,
                               options.baseline_impl)),
        summary=summary.build(its, current),
        matrix=matrix.build(its),
        failures=failures.build(its),
        roofline=roofline.build(its),
        speedup=speed,
        changes=changes.build(comparison) if comparison and comparison.overlaps else None,
        baseline_given=baseline is not None,
        details=details.build(its),
        cap=options.cap,
    )


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """One environment per process: it caches the compiled templates."""
    return jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                              undefined=jinja2.StrictUndefined, trim_blocks=True,
                              lstrip_blocks=True)


def render(report: Report) -> str:
    return environment().get_template("report.html.j2").render(r=report)


def write(report: Report, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(report), encoding="utf-8")
    return path
