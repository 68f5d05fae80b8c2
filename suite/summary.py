"""The terminal summary of a run, printed last, in this order: the failures with their
reasons, one-line diagnoses and the command that reruns each alone (suite/reproduce.py);
the known failures and unexpected passes; the likely cause per failing implementation
across the run (suite/diagnosis/); the table per op and implementation; and one final
line of counts (`17 passed, 13 failed, ...`), as pytest ends.

The table fits WIDTH columns: verdict counts, determinism counts and the geometric mean of
each ceiling's fraction, in the page's units (`6.28 %`, suite/units.py); `wide` adds the
times, launches, memory and rates (and names are not elided). Reasons and diagnoses are
shortened at a word boundary to a terminal line (`full_reasons`: whole).

Determinism is counted honestly: 'bitwise' leaves out any item that left an output
unwritten (repeats that never wrote it are equal for free), and 'nondet' counts the items
whose repeats differed within tolerance beside it. Case ids, implementation names, reasons
and diagnoses come from case and results files and from whatever an implementation raised:
every one goes through suite.text.terminal, so that none reaches the terminal raw."""

from __future__ import annotations

import math
import textwrap
from collections import defaultdict
from dataclasses import dataclass
from typing import Callable, Iterable, Optional, Sequence

from bwd_suite.suite import units
from bwd_suite.suite.outcomes import Determinism, FailureKind, Verdict
from bwd_suite.suite.reproduce import rerun_command
from bwd_suite.suite.rows import ResultRow
from bwd_suite.suite.text import ELLIPSIS, shorten, terminal

MAX_FAILURES_SHOWN = 20
WIDTH = 100  # columns of the table and of every shortened line
INDENT = "        "  # of a failure's reason, diagnosis and rerun command
FULL_REASON_CHARS = 4000  # --full-reasons: whole, up to the row's cap of a reason


def _geomean(values):
    values = [v for v in values if v and v > 0]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def _median(values):
    values = sorted(v for v in values if v is not None)
    return values[len(values) // 2] if values else None


def _span(counts) -> Optional[str]:
    """Kernel launches of the items: one number, or the least and the most."""
    counts = [c for c in counts if c is not None]
    if not counts:
        return None
    lo, hi = min(counts), max(counts)
    return str(lo) if lo == hi else f"{lo}-{hi}"


def _unwritten(row: ResultRow) -> bool:
    """An item that left an output (or part of one) unwritten: its repeats compare
    whatever the buffer held, so their equality says nothing about determinism."""
    return row.failure_kind is FailureKind.UNWRITTEN or any(
        (o.get("n_unwritten") or 0) > 0 for o in row.outputs or ())


def _bitwise(rows: list) -> int:
    return sum(r.determinism is Determinism.BITWISE and not _unwritten(r) for r in rows)


def _nondet(rows: list) -> int:
    return sum(r.determinism is Determinism.NONDETERMINISTIC for r in rows)


def _compute(r: ResultRow) -> bool:
    """Judged against the compute peak, not the copy bandwidth (as the page's roofline)."""
    return r.bound == "compute"


def _timed(rs: list) -> list:
    """The timed items whose speed means something: passing ones, and those as weak as
    the yardstick (they compute as well as it)."""
    return [r for r in rs if r.verdict in (Verdict.PASS, Verdict.WEAK_YARDSTICK) and r.gbps]


# -- the table -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Column:
    head: str
    width: int
    value: Callable[[list], object]  # the implementation's rows -> a number or text
    text: Callable = str  # the number -> its text (suite.units)
    wide_only: bool = False


def _count(pred) -> Callable[[list], int]:
    return lambda rs: sum(bool(pred(r)) for r in rs)


def _undeclared(v: Verdict):
    return lambda r: r.verdict is v and not r.expected


COLUMNS = (
    Column("items", 6, len, wide_only=True),
    Column("pass", 6, _count(lambda r: r.verdict is Verdict.PASS)),
    Column("fail", 6, _count(_undeclared(Verdict.FAIL))),
    Column("known", 6, _count(lambda r: r.expected)),
    Column("weak", 5, _count(lambda r: r.verdict is Verdict.WEAK_YARDSTICK)),
    Column("error", 6, _count(_undeclared(Verdict.ERROR))),
    Column("t/o", 5, _count(_undeclared(Verdict.TIMEOUT))),
    Column("unsup", 6, _count(lambda r: r.verdict is Verdict.UNSUPPORTED)),
    Column("bitwise", 8, _bitwise),
    Column("nondet", 7, _nondet),
    Column("dev time", 9, lambda rs: _median(r.time_median_s for r in _timed(rs)),
           units.seconds, wide_only=True),
    Column("wall", 9, lambda rs: _median(
        None if r.wall_median_ms is None else r.wall_median_ms / 1e3 for r in _timed(rs)),
        units.seconds, wide_only=True),
    Column("launches", 9, lambda rs: _span(r.launches for r in _timed(rs)), wide_only=True),
    Column("temp mem", 9, lambda rs: max((r.peak_mem_bytes for r in rs
                                          if r.peak_mem_bytes is not None), default=None),
           units.nbytes, wide_only=True),
    Column("GB/s", 7, lambda rs: _median(r.gbps for r in _timed(rs)), units.rate,
           wide_only=True),
    Column("of copy BW", 11, lambda rs: _geomean(
        [r.frac_copy_bw for r in _timed(rs) if not _compute(r)]), units.percent),
    Column("of peak", 9, lambda rs: _geomean(
        [r.frac_peak_flops for r in _timed(rs) if _compute(r)]), units.percent),
    Column("same copy", 10, lambda rs: _geomean([r.frac_same_copy for r in _timed(rs)]),
           units.percent, wide_only=True),
)
NAME_WIDTH = WIDTH - sum(c.width for c in COLUMNS if not c.wide_only)  # 25


def _cell(col: Column, rows: list) -> str:
    v = col.value(rows)
    return ("-" if v is None else col.text(v)).rjust(col.width)


def elide(name: str, width: int) -> str:
    """A name in `width` characters: its head and tail around "…" when longer."""
    if len(name) <= width:
        return name
    tail = (width - 1) // 2
    return name[:width - 1 - tail] + ELLIPSIS + name[len(name) - tail:]


LEGEND = (
    "'known': failures the implementation declares (expected); 'weak': items as weak as the "
    "yardstick where it is weaker than the bound (listed apart); 'bitwise' / 'nondet': items "
    "whose repeated calls were bit-for-bit equal (never one that left an output unwritten) / "
    "differed within tolerance (--repeats); 'of copy BW' / 'of peak': over the passing (or "
    "weak) timed items, the geometric mean of GB/s over the measured copy bandwidth "
    "(memory-bound items) "
    "/ of TFLOP/s over the measured compute peak (compute-bound ones), as the report's "
    "roofline")
WIDE_LEGEND = (
    "; 'dev time' the median of their median times, 'wall' of their wall times (one call "
    "until the device is done, as a training loop waits), 'launches' the fewest-most "
    "kernels one call launches (CUDA), 'temp mem' the most memory one checked call "
    "allocated beyond its inputs and outputs (CUDA), 'GB/s' the median of compulsory bytes "
    "/ median time, 'same copy' the geometric mean of the time of a device copy of the "
    "item's bytes, timed alike, over its median (100 %: as fast as copying them)")


def _table(rows: list, wide: bool) -> list:
    groups = defaultdict(list)
    for r in rows:
        groups[(r.op, r.impl)].append(r)
    idle = {k for k, rs in groups.items() if all(r.verdict is Verdict.UNSUPPORTED for r in rs)}
    cols = [c for c in COLUMNS if wide or not c.wide_only]
    names = [terminal(impl) for (_, impl) in groups]
    name_width = max([NAME_WIDTH - 2] + [len(n) for n in names]) if wide else NAME_WIDTH - 2
    head = "  " + "implementation".ljust(name_width) + "".join(c.head.rjust(c.width)
                                                             for c in cols)
    lines = [head, "-" * len(head)]
    op = None
    for (o, impl), rs in sorted(groups.items()):
        if (o, impl) in idle:
            continue
        if o != op:
            lines.append(terminal(o))
            op = o
        lines.append("  " + elide(terminal(impl), name_width).ljust(name_width)
                     + "".join(_cell(c, rs) for c in cols))
    if idle:
        names = ", ".join(f"{terminal(o)}/{terminal(i)}" for o, i in sorted(idle))
        lines.append(f"not run here (every item unsupported; `python -m bwd_suite list` says "
                     f"why): {names}")
    legend = LEGEND + (WIDE_LEGEND if wide else "; --wide: times, launches, memory, rates") + "."
    lines += textwrap.wrap(legend, WIDTH)
    # the flush applies to CUDA timings only (CPU rows say "none" and have no such option)
    flushes = sorted({r.l2_flush for r in rows
                      if r.l2_flush and r.timing_method == "cuda_events"})
    if flushes:
        how = {"none": "without an L2 flush"}
        lines.append("timed " + " / ".join(how.get(k, f"after a {k} L2 flush") for k in flushes)
                     + " (--l2-flush).")
    return lines


# -- the failures ------------------------------------------------------------------------------

class _Clip:
    """Text from the files as one terminal line: shortened at a word boundary to the
    line's room, or whole with --full-reasons."""

    def __init__(self, full: bool):
        self.full = full

    def __call__(self, text, room: int) -> str:
        text = terminal(text)
        return shorten(text, FULL_REASON_CHARS if self.full else max(room, 20))


def _failures(rows: list, clip: _Clip) -> list:
    bad = [r for r in rows if r.verdict.bad and not r.expected]
    if not bad:
        return []
    lines = [f"{len(bad)} failing items"
             + (f" (first {MAX_FAILURES_SHOWN})" if len(bad) > MAX_FAILURES_SHOWN else "")
             + ":"]
    room = WIDTH - len(INDENT)
    for r in bad[:MAX_FAILURES_SHOWN]:
        lines.append(f"  {r.verdict.upper():5} {terminal(r.impl)} {terminal(r.case_id)}")
        lines.append(INDENT + clip(r.reason, room))
        if r.diagnosis:
            lines.append(INDENT + "diagnosis: " + clip(r.diagnosis, room - len("diagnosis: ")))
        command = rerun_command(r)
        if command:
            lines.append(f"{INDENT}rerun: {terminal(command)}")
    return lines


def _known(rows: list, clip: _Clip) -> list:
    """Declared failures that failed (expected, listed apart) and that passed (unexpected
    passes: the declaration is out of date, and the run fails as pytest's strict xfail)."""
    lines = []
    expected = [r for r in rows if r.expected]
    if expected:
        per = defaultdict(list)
        for r in expected:
            per[(r.op, r.impl, r.known_failure)].append(r)
        lines.append(f"\n{len(expected)} known failures (declared by the implementation, "
                     f"expected):")
        for (op, impl, why), rs in sorted(per.items()):
            head = f"  {terminal(op)}/{terminal(impl)}: {len(rs)} items: "
            lines.append(head + clip(why, WIDTH - len(head)))
    passed = [r for r in rows if r.unexpected_pass]
    if passed:
        lines.append(f"\n{len(passed)} unexpected passes (declared to fail, now pass: update "
                     f"the implementation's known_failures):")
        for r in passed[:MAX_FAILURES_SHOWN]:
            lines.append(f"  {terminal(r.impl)} {terminal(r.case_id)}")
            command = rerun_command(r)
            if command:
                lines.append(f"{INDENT}rerun: {terminal(command)}")
    return lines


def _run_diagnoses(rows: list, clip: _Clip) -> list:
    """One line per failing implementation: its likely cause across all its items."""
    from bwd_suite.suite.diagnosis import diagnose_run

    found = [d for d in diagnose_run(rows) if d.n_failed]
    if not found:
        return []
    lines = ["\nlikely causes across the run:"]
    for d in found:
        head = f"  {terminal(d.impl)}: "
        lines.append(head + clip(d.text, WIDTH - len(head)))
    return lines


def _weak_yardstick(rows: list, clip: _Clip) -> list:
    """The cases whose yardstick is weaker than the bound, and the items as weak as it
    there (the weak_yardstick outcome, whatever their name), per implementation."""
    weak = [r for r in rows if r.yardstick_note and r.verdict.compared]
    if not weak:
        return []
    cases = len({(r.op, r.case_id) for r in weak})
    head = textwrap.wrap(f"the yardstick was worse than fp32 with one rounding on {cases} "
                         f"cases: their bounds use the fp32 error (column yardstick_note), "
                         f"e.g.", WIDTH)
    example = f"  {terminal(weak[0].case_id)}: "
    lines = ["", *head, example + clip(weak[0].yardstick_note, WIDTH - len(example))]
    as_weak = [r for r in rows if r.verdict is Verdict.WEAK_YARDSTICK]
    if as_weak:
        lines.append(f"{len(as_weak)} items as weak as the yardstick (beyond that bound with "
                     f"its own outputs bit for bit; verdict weak_yardstick, listed apart):")
        per = defaultdict(list)
        for r in as_weak:
            per[(r.op, r.impl)].append(r)
        for (op, impl), rs in sorted(per.items()):
            head = f"  {terminal(op)}/{terminal(impl)}: {len(rs)} items, e.g. "
            lines.append(head + clip(f"{rs[0].case_id}: {rs[0].reason}", WIDTH - len(head)))
    return lines


# -- the last line -----------------------------------------------------------------------------

def final_line(rows: Sequence[ResultRow], elapsed_s: Optional[float] = None) -> str:
    """`17 passed, 13 failed, 0 errors, 0 unsupported, 0 known failures` (and timeouts,
    items as weak as the yardstick and unexpected passes when there are some), as pytest's
    last line: 'passed' leaves out the
    unexpected passes, 'failed', 'errors' and 'timeouts' the declared failures, which
    'known failures' counts."""
    n = defaultdict(int)
    for r in rows:
        if r.unexpected_pass:
            n["unexpected"] += 1
        elif r.expected:
            n["known"] += 1
        else:
            n[r.verdict] += 1
    parts = [f"{n[Verdict.PASS]} passed", f"{n[Verdict.FAIL]} failed",
             f"{n[Verdict.ERROR]} error{'s' * (n[Verdict.ERROR] != 1)}",
             f"{n[Verdict.UNSUPPORTED]} unsupported",
             f"{n['known']} known failure{'s' * (n['known'] != 1)}"]
    if n[Verdict.WEAK_YARDSTICK]:
        parts.append(f"{n[Verdict.WEAK_YARDSTICK]} as weak as the yardstick")
    if n[Verdict.TIMEOUT]:
        parts.append(f"{n[Verdict.TIMEOUT]} timeout{'s' * (n[Verdict.TIMEOUT] != 1)}")
    if n["unexpected"]:
        parts.append(f"{n['unexpected']} unexpected pass{'es' * (n['unexpected'] != 1)}")
    took = f" in {units.seconds(elapsed_s)}" if elapsed_s is not None else ""
    return ", ".join(parts) + took


def render(rows: Iterable[ResultRow], wide: bool = False, full_reasons: bool = False,
           footer: Sequence[str] = (), elapsed_s: Optional[float] = None) -> str:
    """The summary; `footer`: lines put just before the final line (the results file, the
    command that reruns the failures)."""
    rows = list(rows)
    clip = _Clip(full_reasons)
    lines = _failures(rows, clip)
    lines += _known(rows, clip)
    if any(r.verdict.bad and not r.expected for r in rows):
        lines += _run_diagnoses(rows, clip)
    lines += _weak_yardstick(rows, clip)
    lines += ([""] if lines else []) + _table(rows, wide)
    lines += list(footer) + [final_line(rows, elapsed_s)]
    return "\n".join(lines)
