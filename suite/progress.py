"""Progress lines of a long run, on stderr: a driver sink (suite/driver.py).

Failing and erroring items are printed as they happen, with their reason; failures the
implementation declares (known failures) are printed as expected, and declared failures
that passed as unexpected passes (they fail the run). The others update one line on a
terminal, or print every twentieth of the run elsewhere (CI logs).

Implementations that cannot run on this device at all (`not_here`: a GPU-only one on a
CPU) are named once at the start; their items are left out of the counter and the ETA,
which would otherwise race through them and promise a run twice as long as it is.
Names and reasons come from case and results files and from whatever an implementation
raised: every one goes through suite.text.terminal.
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Mapping, Optional

from bwd_suite.suite.outcomes import Verdict
from bwd_suite.suite.rows import ResultRow
from bwd_suite.suite.text import shorten, terminal

WIDTH = 150
# of a failure's reason and a known failure's declaration on their line, shortened at a
# word boundary: the summary lists them again (whole with run --full-reasons)
REASON_CHARS, DECLARED_CHARS = 300, 120
# the line naming the left-out implementations: names while it stays this short, then
# "and N more"; each reason clipped to the second number
NOT_HERE_CHARS, NOT_HERE_REASON_CHARS = 240, 80


@dataclass(frozen=True)
class NotHere:
    """An implementation that cannot run on this device: the plan's items of it (each
    recorded as unsupported) and why, e.g. "runs on cuda only, not cpu"."""

    items: int
    reason: str


class Progress:
    """A sink printing progress lines.

    total: every item of the plan; not_here: "op/impl" -> NotHere for the implementations
    that cannot run here, whose items are subtracted from `total` and whose unsupported
    rows are neither counted nor printed."""

    def __init__(self, total: int, quiet: bool = False, stream=None,
                 not_here: Optional[Mapping[str, NotHere]] = None):
        self.not_here = dict(not_here or {})
        self.total = total - sum(n.items for n in self.not_here.values())
        self.done, self.quiet = 0, quiet
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty()
        self.start = time.monotonic()
        self.every = max(1, self.total // 20)
        if self.not_here and not quiet:
            print(not_here_line(self.not_here), file=self.stream, flush=True)

    def add(self, row: ResultRow) -> None:
        line = streamed_line(row)
        if line:
            self._clear()
            print(line, file=self.stream)
        if self._left_out(row):
            return
        self.done += 1
        if self.quiet:
            return
        elapsed = time.monotonic() - self.start
        eta = elapsed / self.done * max(0, self.total - self.done)
        line = (f"[{self.done:>5}/{self.total}] {elapsed:6.1f}s, ~{eta:5.0f}s left  "
                f"{terminal(row.impl)} {terminal(row.case_id)}")
        if self.tty:
            print("\r" + line[:WIDTH].ljust(WIDTH), end="", file=self.stream, flush=True)
        elif self.done % self.every == 0 or self.done == self.total:
            print(line, file=self.stream, flush=True)

    def _left_out(self, row: ResultRow) -> bool:
        """An item of an implementation named as not runnable here, recorded unsupported
        (anything else it records still counts: nothing that ran is hidden)."""
        return row.verdict is Verdict.UNSUPPORTED and f"{row.op}/{row.impl}" in self.not_here

    def _clear(self) -> None:
        if self.tty and not self.quiet:
            print("\r" + " " * WIDTH + "\r", end="", file=self.stream)

    def close(self) -> None:
        self._clear()


def streamed_line(row: ResultRow) -> Optional[str]:
    """The line a row gets as it finishes, or None: an undeclared failure with its
    reason, a declared one as expected, a declared one that passed as unexpected."""
    who = f"{terminal(row.impl)} {terminal(row.case_id)}"
    declared = shorten(terminal(row.known_failure or ""), DECLARED_CHARS)
    if row.unexpected_pass:
        return f"  UNEXPECTED PASS {who}: declared to fail: {declared}"
    if row.expected:
        return f"  expected {row.verdict.upper()} {who}: declared: {declared}"
    if row.verdict is not None and row.verdict.bad:
        return f"  {row.verdict.upper()} {who}: {shorten(terminal(row.reason), REASON_CHARS)}"
    return None


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


def not_here_line(not_here: Mapping[str, NotHere], limit: int = NOT_HERE_CHARS) -> str:
    """One line naming the left-out implementations grouped by reason, the largest group
    first: as many names as fit in about `limit` characters (at least one), then how
    many more."""
    groups = defaultdict(list)
    for key in sorted(not_here):
        reason = _clip(terminal(not_here[key].reason), NOT_HERE_REASON_CHARS)
        groups[reason].append(terminal(key))
    items = sum(n.items for n in not_here.values())
    n = len(not_here)
    head = (f"not run here (recorded as unsupported; {items:,} item{'s' * (items != 1)} of "
            f"{n} implementation{'s' * (n != 1)}): ")
    parts, shown = [], 0
    for reason, names in sorted(groups.items(), key=lambda g: (-len(g[1]), g[0])):
        fit = []
        for name in names:
            trial = "; ".join(parts + [f"{', '.join(fit + [name])} ({reason})"])
            if shown + len(fit) and len(head) + len(trial) > limit:
                break
            fit.append(name)
        if fit:
            parts.append(f"{', '.join(fit)} ({reason})")
            shown += len(fit)
        if len(fit) < len(names):
            break
    rest = n - shown
    more = f"; and {rest} more (`python -m bwd_suite list` says why)" if rest else ""
    return head + "; ".join(parts) + more
