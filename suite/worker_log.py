"""A worker's log (its stdout and stderr, C code's included) and what each item wrote to it.

The worker keeps its own log: it knows where its item began, cuts the log back to its tail
between items and, from a watchdog thread, during an item that prints without end, and
reads its item's output itself, all under one lock, so an offset is never read while the
file is being cut. (The parent cutting the log while the worker read sizes gave a silent
item the previous item's output: a size read between the truncate and the rewrite.)
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Callable, Optional

OUTPUT_TAIL_CHARS, OUTPUT_LINE_CHARS = 4000, 500
WATCH_PERIOD_S = 0.5


def tail_text(raw: bytes, chars: int = OUTPUT_TAIL_CHARS) -> str:
    """The last lines of what an item wrote, each cut to OUTPUT_LINE_CHARS, at most
    `chars` in all: one 4 MiB line must not become every row's reason."""
    lines = [ln if len(ln) <= OUTPUT_LINE_CHARS else ln[:OUTPUT_LINE_CHARS] + " [...]"
             for ln in raw.decode("utf-8", "replace").splitlines() if ln.strip()]
    kept, size = [], 0
    for ln in reversed(lines):
        if size + len(ln) + 1 > chars:
            break
        kept.append(ln)
        size += len(ln) + 1
    return "\n".join(reversed(kept))


def read_tail(path: str, start: int, end: Optional[int] = None) -> str:
    """tail_text of the file's bytes from `start` to `end` (default: its end)."""
    with open(path, "rb") as f:
        f.seek(start)
        return tail_text(f.read(-1 if end is None else max(0, end - start)))


def cut_log(path: str, keep_bytes: int, offset: int) -> int:
    """Cut the file back to its last `keep_bytes` behind a one-line notice; returns where
    old `offset` lies now (the first kept byte where the cut dropped it: an item keeps
    what it wrote that was kept). Bytes appended while it cuts may be lost; a log is a
    tail, not a record."""
    with open(path, "r+b") as f:
        size = os.fstat(f.fileno()).st_size
        cut_from = max(0, size - keep_bytes)
        f.seek(cut_from)
        keep = f.read(size - cut_from)
        notice = f"[bwd-suite: {cut_from} earlier bytes of this log dropped]\n".encode()
        f.seek(0)
        f.truncate()
        f.write(notice + keep)
    return len(notice) + max(0, offset - cut_from)


class WorkerLog:
    """The worker's side: fds 1 and 2 append to `path`. `begin` starts an item (cutting a
    log past `cap_bytes` first) and tells the parent where its output begins, `end` gives
    its output; a watchdog thread cuts a log that passes `cap_bytes` during an item and
    tells the parent where the item's output begins now (for a worker that dies in it).
    Those messages are sent under the lock, so the parent gets them in the log's order."""

    def __init__(self, path: str, cap_bytes: int, keep_bytes: int,
                 send: Callable[..., None]):
        self.path, self.cap, self.keep, self.send = path, cap_bytes, keep_bytes, send
        self.lock = threading.Lock()
        self.start: Optional[int] = None  # where the item in flight began

    def _size(self) -> int:
        sys.stdout.flush()
        sys.stderr.flush()
        return os.path.getsize(self.path)

    def _cut_if_long(self) -> bool:
        if self._size() <= self.cap:
            return False
        moved = cut_log(self.path, self.keep, self.start or 0)
        if self.start is not None:
            self.start = moved
        return True

    def begin(self, **start_message) -> None:
        """Start an item: send `start_message` with `log`, the offset its output begins at."""
        with self.lock:
            self._cut_if_long()
            self.start = self._size()
            self.send(m="start", log=self.start, **start_message)

    def end(self) -> str:
        """The item's output (its tail, tail_text), and no item in flight."""
        with self.lock:
            end, start = self._size(), self.start or 0
            self.start = None
            return read_tail(self.path, start, end)

    def check(self) -> None:
        """The watchdog's one look: cut a log past the cap during an item."""
        with self.lock:
            if self.start is not None and self._cut_if_long():
                self.send(m="log_cut", start=self.start)

    def watch(self, period_s: float = WATCH_PERIOD_S) -> None:
        """The watchdog's loop (a daemon thread's target)."""
        while True:
            time.sleep(period_s)
            self.check()

    def start_watchdog(self) -> None:
        threading.Thread(target=self.watch, name="bwd-suite-log-watch", daemon=True).start()
