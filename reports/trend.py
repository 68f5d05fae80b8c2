"""The history's trend of one item as plain geometry for an inline SVG: its median time
over the runs on a time axis (runs placed by when they started, the first and last dates
under it), the top and bottom of the time scale beside it, a dot per run (its title: when
it started, its commit, verdict and median), and a vertical mark per step or verdict
change (its title: the change and the commit range it happened in). The template only
draws what is computed here."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Optional, Sequence

from bwd_suite.reports import fmt

WIDTH, HEIGHT = 270, 58
PLOT_L, PLOT_R = 50, 264  # the left gutter holds the time scale's labels
PLOT_T, PLOT_B = 5, 36  # timed dots
FLOOR = 41  # dots of runs that did not time the item alike
AXIS = 45  # the time axis, its tick labels below
MIN_SPAN = 2 * math.log(1.01)  # the least time range drawn: flat lines stay flat


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
class Label:
    x: float
    y: float
    text: str
    anchor: str  # SVG text-anchor


@dataclass(frozen=True)
class Spark:
    width: int
    height: int
    line: str  # polyline points of the timed runs
    dots: tuple
    marks: tuple
    floor: float  # y of the untimed dots
    plot: tuple = (PLOT_L, PLOT_T, PLOT_R, PLOT_B)  # the plot's box: x1, y1, x2, y2
    axis: float = AXIS  # y of the time axis
    ticks: tuple = ()  # Label under the time axis (x is also the tick's)
    scale: tuple = ()  # Label of the top and bottom of the time scale


def timestamp(iso: str) -> Optional[float]:
    """Seconds since the epoch of an ISO 8601 time (run_started), None when it is none."""
    try:
        return datetime.fromisoformat(iso).timestamp()
    except (TypeError, ValueError):
        return None


def x_positions(times: Sequence[Optional[float]]) -> list:
    """The x of each run: by when it started, or evenly in order where a run has no start
    time or all started at once."""
    n = len(times)
    if n < 2:
        return [round((PLOT_L + PLOT_R) / 2, 1)] * n
    known = [t for t in times if t is not None]
    if len(known) == n and max(known) > min(known):
        lo, hi = min(known), max(known)
        return [round(PLOT_L + (t - lo) / (hi - lo) * (PLOT_R - PLOT_L), 1) for t in times]
    return [round(PLOT_L + k * (PLOT_R - PLOT_L) / (n - 1), 1) for k in range(n)]


def _date(iso: str, span_s: float) -> str:
    """A tick's text: the date, with the time of day when the runs span under two days."""
    text = iso[:16].replace("T", " ") if len(iso) >= 16 else iso
    return text[5:] if span_s < 2 * 86400 else text[:10]


def ticks(started: Sequence[str], xs: Sequence[float]) -> tuple:
    """The first and the last run's start under the time axis (one when they coincide)."""
    if not xs:
        return ()
    times = [timestamp(s) for s in started]
    span = (max(times) - min(times)) if all(t is not None for t in times) else 0.0
    first = Label(xs[0], HEIGHT - 2, _date(started[0], span), "start")
    if len(xs) < 2 or xs[-1] - xs[0] < 1:
        return (first,)
    return first, Label(xs[-1], HEIGHT - 2, _date(started[-1], span), "end")


@dataclass(frozen=True)
class Scale:
    """The log-time scale of one trend: every timed median inside the plot's box."""

    bottom: float  # log seconds at PLOT_B
    span: float  # log seconds from PLOT_B to PLOT_T

    @classmethod
    def of(cls, medians: Sequence[float], min_span: float = MIN_SPAN) -> "Scale":
        logs = [math.log(m) for m in medians]
        lo, hi = min(logs), max(logs)
        span = max(hi - lo, min_span)
        return cls((hi + lo) / 2 - span / 2, span)

    def y(self, seconds: float) -> float:
        return round(PLOT_T + (PLOT_B - PLOT_T) * (1 - (math.log(seconds) - self.bottom)
                                                   / self.span), 1)

    def labels(self) -> tuple:
        return (Label(PLOT_L - 4, PLOT_T + 7, fmt.time_text(math.exp(self.bottom + self.span)),
                      "end"),
                Label(PLOT_L - 4, PLOT_B, fmt.time_text(math.exp(self.bottom)), "end"))
