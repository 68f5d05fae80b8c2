"""Progress lines of a long run, on stderr: a driver sink (suite/driver.py).

Failing and erroring items are printed as they happen, with their reason; the others
update one line on a terminal, or print every twentieth of the run elsewhere (CI logs).
"""

from __future__ import annotations

import sys
import time

from suite.rows import ResultRow

WIDTH = 150


class Progress:
    def __init__(self, total: int, quiet: bool = False, stream=None):
        self.total, self.done, self.quiet = total, 0, quiet
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty()
        self.start = time.monotonic()
        self.every = max(1, total // 20)

    def add(self, row: ResultRow) -> None:
        self.done += 1
        if row.verdict.bad:
            self._clear()
            print(f"  {row.verdict.upper()} {row.impl} {row.case_id}: {row.reason[:300]}",
                  file=self.stream)
        if self.quiet:
            return
        elapsed = time.monotonic() - self.start
        eta = elapsed / self.done * (self.total - self.done)
        line = (f"[{self.done:>5}/{self.total}] {elapsed:6.1f}s, ~{eta:5.0f}s left  "
                f"{row.impl} {row.case_id}")
        if self.tty:
            print("\r" + line[:WIDTH].ljust(WIDTH), end="", file=self.stream, flush=True)
        elif self.done % self.every == 0 or self.done == self.total:
            print(line, file=self.stream, flush=True)

    def _clear(self) -> None:
        if self.tty and not self.quiet:
            print("\r" + " " * WIDTH + "\r", end="", file=self.stream)

    def close(self) -> None:
        self._clear()
