"""The page's sections in order, with the count the navigation shows for each, and which
of them start folded (issue 40: a CPU page was 129,000 px tall, its roofline chart 66,000 px
down).

Every section sits in a `<details class="fold">` whose summary is its heading and count.
A short one starts open; a long one (more than SHORT_ROWS table rows, a chart counting as
CHART_ROWS, where its own folds are open) starts folded, so the page opens as a list of
sections with their counts. The summary and the changes always start open: they are what
the page is read for, and they fold their own long parts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

SHORT_ROWS = 40  # rows a section may show and still start open
CHART_ROWS = 15  # a chart is about as tall as this many rows
ALWAYS_OPEN = frozenset({"summary", "changes"})


@dataclass(frozen=True)
class Section:
    id: str  # the <section>'s id, the navigation's target
    template: str  # its template in reports/templates/
    title: str  # in the navigation
    heading: str  # the fold's summary
    count: str  # "13", "no baseline": beside the title; "" for none
    unit: str  # what the count counts, beside it in the fold's summary
    open: bool = True  # start unfolded


def _n(n: int) -> str:
    return f"{n:,}"


def _changes(report) -> tuple:
    if not report.baseline_given:
        return "no baseline", ""
    if report.changes is None:
        return "nothing compared", ""
    keys = ("regressions", "new-failures", "failing-new-cases", "unexpected-passes",
            "improvements", "fixed")
    n = sum(x.n_total for x in report.changes.listings if x.key in keys)
    return _n(n), "changed items"


def build(report) -> tuple:
    """The sections of a render.Report, in page order, all open (`folded` decides)."""
    changes_count, changes_unit = _changes(report)
    out = [
        Section("summary", "_summary.html.j2", "Summary", "Run summary",
                _n(int(report.summary.total.items.raw)), "items"),
        Section("changes", "_changes.html.j2", "Changes", "Changes against the baseline run",
                changes_count, changes_unit),
    ]
    if report.history:
        h = report.history
        out.append(Section("history", "_history.html.j2", "History", "History",
                           f"{_n(h.n_changed)} of {_n(h.n_items)}", "items changed"))
    out += [
        Section("matrix", "_matrix.html.j2", "Conformance matrix", "Conformance matrix",
                _n(sum(g.n_cases for m in report.matrix for g in m.groups)), "cases"),
        Section("failures", "_failures.html.j2", "Failures", "Failures",
                _n(report.failures.n_total), "failing items no implementation declares"),
        Section("known-failures", "_known.html.j2", "Known failures",
                "Known failures (expected)", _n(report.known.n_total if report.known else 0),
                "items failed as declared"),
    ]
    if report.weak and report.weak.n_total:  # only where some item is as weak as it
        out.append(Section("weak-yardstick", "_weak.html.j2", "Weak yardstick",
                           "As weak as the yardstick (declared)", _n(report.weak.n_total),
                           "items"))
    out += [
        Section("coverage", "_coverage.html.j2", "Coverage", "Coverage",
                _n(len(report.coverage.impls) if report.coverage else 0), "implementations"),
        Section("roofline", "_roofline.html.j2", "Roofline", "Roofline",
                _n(sum(o.n_timed for o in report.roofline)), "timed items"),
        Section("memory-ledger", "_ledger.html.j2", "Memory ledger", "Memory ledger",
                _n(sum(len(x.rows) + len(x.more_rows) for x in report.ledger)), "items"),
        Section("steps", "_steps.html.j2", "Training steps", "Training steps",
                _n(len(report.steps)), "scenarios"),
        Section("side-by-side", "_speedup.html.j2", "Side by side",
                "Implementations side by side",
                _n(sum(len(s.rows) for s in report.speedup)), "cases"),
        Section("details", "_details.html.j2", "Item details", "Item details",
                _n(sum(len(d.rows) for d in report.details)), "items"),
    ]
    return tuple(out)


@dataclass(frozen=True)
class Filters:
    """The choices of the page's filter bar (templates/page.js)."""

    ops: tuple
    impls: tuple
    verdicts: tuple


def filters(report) -> Filters:
    counts = report.summary.counts
    return Filters(ops=tuple(dict.fromkeys(c.op for c in counts)),
                   impls=tuple(sorted({c.impl for c in counts})),
                   verdicts=tuple(map(str, report.summary.verdicts)))


_TOKENS = re.compile(r"<details\b[^>]*>|</details>|<tr\b|<svg class=\"chart\"")
_OPEN = re.compile(r"\sopen[\s>=]")


def shown_rows(html: str) -> int:
    """The table rows (a chart as CHART_ROWS) of rendered HTML outside folded <details>: how
    long it reads with its own folds as they start."""
    folded, n = [], 0  # one flag per enclosing <details>: True when it starts folded
    for m in _TOKENS.finditer(html):
        tok = m.group(0)
        if tok.startswith("<details"):
            folded.append(not _OPEN.search(tok))
        elif tok == "</details>":
            if folded:
                folded.pop()
        elif not any(folded):
            n += CHART_ROWS if tok.startswith("<svg") else 1
    return n


def folded(section: Section, html: str) -> Section:
    """The section, open when it is short (`html`: its rendered body) or always open."""
    return replace(section, open=section.id in ALWAYS_OPEN or shown_rows(html) <= SHORT_ROWS)
