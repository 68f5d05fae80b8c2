"""The terminal summary of a run: verdict counts, device and wall time, kernel launches
and speed per (op, implementation), then the failures with their reasons and one-line
diagnoses, then the likely cause per failing implementation across the run
(suite/diagnosis/).

Determinism is counted honestly: 'bitwise' leaves out any item that left an output
unwritten (repeats that never wrote it are equal for free), and 'nondet' counts the items
whose repeats differed within tolerance beside it. Case ids, implementation names, reasons
and diagnoses come from case and results files and from whatever an implementation raised:
every one goes through suite.text.terminal, so that none reaches the terminal raw."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Iterable

from bwd_suite.suite.outcomes import Determinism, FailureKind, Verdict
from bwd_suite.suite.rows import ResultRow
from bwd_suite.suite.text import terminal

VERDICTS = tuple(Verdict)
MAX_FAILURES_SHOWN = 20


def _geomean(values):
    values = [v for v in values if v and v > 0]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def _fmt(v, spec):
    """v in a column of format `spec` (a width first); "-", right-aligned, when missing."""
    return format(v, spec) if v is not None else "-".rjust(int(spec.split(".")[0]))


def _median(values):
    values = sorted(v for v in values if v is not None)
    return values[len(values) // 2] if values else None


def _span(counts) -> str:
    """Kernel launches of the items: one number, or the least and the most; "-" for none."""
    counts = [c for c in counts if c is not None]
    if not counts:
        return "-"
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


def _run_diagnoses(rows: list) -> list:
    """One line per failing implementation: its likely cause across all its items."""
    from bwd_suite.suite.diagnosis import diagnose_run

    found = [d for d in diagnose_run(rows) if d.n_failed]
    if not found:
        return []
    return ["\nlikely causes across the run:"] + [
        f"  {terminal(d.impl)}: {terminal(d.text)}" for d in found]


def _known(rows: list) -> list:
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
        lines += [f"  {terminal(op)}/{terminal(impl)}: {len(rs)} items: {terminal(why[:300])}"
                  for (op, impl, why), rs in sorted(per.items())]
    passed = [r for r in rows if r.unexpected_pass]
    if passed:
        lines.append(f"\n{len(passed)} unexpected passes (declared to fail, now pass: update "
                     f"the implementation's known_failures):")
        lines += [f"  {terminal(r.impl)} {terminal(r.case_id)}"
                  for r in passed[:MAX_FAILURES_SHOWN]]
    return lines


def render(rows: Iterable[ResultRow]) -> str:
    rows = list(rows)
    groups = defaultdict(list)
    for r in rows:
        groups[(r.op, r.impl)].append(r)
    idle = {k: rs for k, rs in groups.items() if all(r.verdict is Verdict.UNSUPPORTED
                                                     for r in rs)}
    head = (f"{'op':<16} {'implementation':<30} {'items':>5} "
            + " ".join(f"{v:>11}" for v in VERDICTS)
            + f" {'bitwise':>8} {'nondet':>7} {'dev ms':>9} {'wall ms':>9} {'launches':>9}"
            + f" {'temp MB':>9} {'median GB/s':>12} {'frac copy':>10} {'same copy':>10}")
    lines = [head, "-" * len(head)]
    for (op, impl), rs in sorted(groups.items()):
        if (op, impl) in idle:
            continue
        counts = [sum(r.verdict is v for r in rs) for v in VERDICTS]
        timed = [r for r in rs if r.verdict is Verdict.PASS and r.gbps]
        gbps = sorted(r.gbps for r in timed)
        med = gbps[len(gbps) // 2] if gbps else None
        frac = _geomean([r.frac_copy_bw for r in timed])
        same = _geomean([r.frac_same_copy for r in timed])
        dev = _median([1e3 * r.time_median_s for r in timed if r.time_median_s is not None])
        wall = _median([r.wall_median_ms for r in timed])
        temps = [r.peak_mem_bytes for r in rs if r.peak_mem_bytes is not None]
        temp = max(temps) / 1e6 if temps else None
        lines.append(f"{terminal(op):<16} {terminal(impl):<30} {len(rs):>5} "
                     + " ".join(f"{n:>11}" for n in counts)
                     + f" {_bitwise(rs):>8} {_nondet(rs):>7}"
                     + f" {_fmt(dev, '9.4g')} {_fmt(wall, '9.4g')}"
                     + f" {_span(r.launches for r in timed):>9} {_fmt(temp, '9.4g')}"
                     + f" {_fmt(med, '12.4g')} {_fmt(frac, '10.3g')}"
                     + f" {_fmt(same, '10.3g')}")
    if idle:
        names = ", ".join(f"{terminal(op)}/{terminal(impl)}" for op, impl in sorted(idle))
        lines.append(f"not run here (every item unsupported; `python -m bwd_suite list` says "
                     f"why): {names}")
    bad = [r for r in rows if r.verdict.bad and not r.expected]
    if bad:
        lines.append(f"\n{len(bad)} failing items"
                     + (f" (first {MAX_FAILURES_SHOWN})" if len(bad) > MAX_FAILURES_SHOWN else "")
                     + ":")
        for r in bad[:MAX_FAILURES_SHOWN]:
            lines.append(f"  {r.verdict.upper():5} {terminal(r.impl)} {terminal(r.case_id)}")
            lines.append(f"        {terminal(r.reason[:400])}")
            if r.diagnosis:
                lines.append(f"        diagnosis: {terminal(r.diagnosis[:400])}")
    lines += _known(rows)
    weak = [r for r in rows if r.yardstick_note and r.verdict.compared]
    if weak:
        cases = len({(r.op, r.case_id) for r in weak})
        lines.append(f"\nthe yardstick was worse than fp32 with one rounding on {cases} cases: "
                     f"their bounds use the fp32 error (column yardstick_note), e.g. "
                     f"{terminal(weak[0].case_id)}: {terminal(weak[0].yardstick_note[:200])}")
    if bad:
        lines += _run_diagnoses(rows)
    lines.append("\ncounts: 'bitwise' the items whose repeated calls were bit-for-bit equal "
                 "(never one that left an output unwritten), 'nondet' those whose repeats "
                 "differed, each within tolerance (--repeats);\nframe: over passing timed "
                 "items, 'dev ms' is the median of their median times, 'wall ms' of their "
                 "wall times (one call until the device is done, as a training loop waits),"
                 "\n'launches' the fewest-most kernels one call "
                 "launches (CUDA); 'temp MB' the most memory one checked call allocated beyond "
                 "its inputs and outputs (CUDA);\n'frac copy' is the geometric mean of GB/s "
                 "(compulsory bytes / median time) over the measured copy bandwidth;\n"
                 "'same copy' of the time of a device copy of the item's bytes, timed "
                 "alike, over its median (1: as fast as copying them).")
    # the flush applies to CUDA timings only (CPU rows say "none" and have no such option)
    flushes = sorted({r.l2_flush for r in rows
                      if r.l2_flush and r.timing_method == "cuda_events"})
    if flushes:
        how = {"none": "without an L2 flush"}
        lines[-1] += ("\ntimed " + " / ".join(how.get(k, f"after a {k} L2 flush") for k in flushes)
                      + " (--l2-flush).")
    return "\n".join(lines)
