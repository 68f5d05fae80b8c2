"""How busy other processes kept the host while we timed: a row's `host_load`.

A CPU timing on a loaded machine measures the scheduler, not the call: on a 2-core host
with other work running, two identical runs 35 s apart differed by up to x2440, the
samples falling at multiples of about 4 ms (time slices). `compare` refuses to read a
ratio from such timings (suite/regression.py, docs/timing.md#host-load).

The meter reads /proc/stat before and after the samples: the busy time of the cores this
process may run on (user, nice, system, irq, softirq and steal clock ticks), minus this
process's own CPU time (every thread), over the wall time and the number of those cores.
That is the average share of them that other processes (other workers included) kept
busy. /proc/stat counts whole clock ticks, so a window shorter than MIN_WINDOW_TICKS
starts instead at this process's latest earlier reading old enough, if one was taken in
the last MAX_LOOKBACK_S (a run times an item every few tens of milliseconds; one reading
is taken at import for the first): the moments just before the samples stand in for the
ticks they were too short to show. It is None where /proc/stat cannot be read or no such
window exists.
"""

from __future__ import annotations

import os
import time
from collections import deque
from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

PROC_STAT = "/proc/stat"
# Columns of a cpu line that count as busy (proc(5)): user, nice, system, irq, softirq,
# steal. guest and guest_nice are already inside user and nice; idle and iowait are not busy.
_BUSY_COLUMNS = (0, 1, 2, 5, 6, 7)
# /proc/stat counts in clock ticks (10 ms at the usual USER_HZ of 100) and each counter
# read twice may be off by a tick: over 1 ms one tick reads as ten cores busy, over five
# ticks (50 ms) as a fifth of one. Shorter windows start earlier (window_start).
MIN_WINDOW_TICKS = 5
# How far back a short window may start: the load of the last second still describes the
# samples, that of the last minute would not.
MAX_LOOKBACK_S = 1.0


@dataclass(frozen=True)
class Reading:
    """One look at the clocks: wall time, the cores' busy time, our own CPU time."""

    wall_s: float  # time.perf_counter
    busy_s: Optional[float]  # busy seconds of the cores counted, summed; None: unreadable
    cores: int  # how many cores busy_s covers
    own_s: float  # this process's CPU seconds, every thread (time.process_time)


def busy_ticks(stat_text: str, cpus: Optional[Iterable[int]] = None) -> tuple:
    """(busy clock ticks, number of cores) from the text of /proc/stat, over the cores
    `cpus` (None: all). The aggregate "cpu" line is used when it covers them: it is
    rounded once, where a sum of per-core lines carries one rounding per core."""
    total, per_cpu = None, {}
    for line in stat_text.splitlines():
        fields = line.split()
        if not fields or not fields[0].startswith("cpu"):
            continue
        busy = sum(int(fields[1 + i]) for i in _BUSY_COLUMNS if 1 + i < len(fields))
        if fields[0] == "cpu":
            total = busy
        else:
            per_cpu[int(fields[0][3:])] = busy
    wanted = set(per_cpu) if cpus is None else set(cpus) & set(per_cpu)
    if not wanted:
        raise ValueError("no cpu line for the cores asked for in /proc/stat")
    if wanted == set(per_cpu) and total is not None:
        return total, len(per_cpu)
    return sum(per_cpu[c] for c in wanted), len(wanted)


def _allowed_cpus() -> Optional[set]:
    """The cores this process may run on (a CI container is often pinned to a few of the
    host's); None where the platform does not say."""
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def read(path: str = PROC_STAT) -> Reading:
    """A Reading now; busy_s is None where `path` cannot be read or parsed."""
    own = time.process_time()
    wall = time.perf_counter()
    try:
        with open(path) as f:
            ticks, cores = busy_ticks(f.read(), _allowed_cpus())
        busy = ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        busy, cores = None, 0
    return Reading(wall_s=wall, busy_s=busy, cores=cores, own_s=own)


def other_share(before: Reading, after: Reading,
                min_window_s: float = MIN_WINDOW_TICKS / 100) -> Optional[float]:
    """The average share of the cores that processes other than this one kept busy
    between two readings, clamped to [0, 1] (tick rounding can step slightly past either
    end); None where a reading failed, the cores changed, or the window is under
    min_window_s."""
    wall = after.wall_s - before.wall_s
    if (before.busy_s is None or after.busy_s is None or before.cores != after.cores
            or not after.cores or wall < min_window_s or wall <= 0):
        return None
    others = (after.busy_s - before.busy_s) - (after.own_s - before.own_s)
    return min(1.0, max(0.0, others / (wall * after.cores)))


def window_start(before: Reading, earlier: Sequence[Reading], after: Reading,
                 min_window_s: float, max_lookback_s: float = MAX_LOOKBACK_S
                 ) -> Optional[Reading]:
    """Where the window ending at `after` starts: `before` when that is long enough, else
    the latest of `earlier` (oldest first) at least min_window_s and at most
    max_lookback_s before `after`; None when there is none."""
    if after.wall_s - before.wall_s >= min_window_s:
        return before
    for r in reversed(earlier):
        age = after.wall_s - r.wall_s
        if age > max_lookback_s:
            break
        if age >= min_window_s:
            return r
    return None


# This process's readings with a busy time, oldest first, for window_start. A forked
# child's own CPU time starts again from zero, so it must not use its parent's.
_recent: deque = deque(maxlen=64)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_recent.clear)


def _remember(r: Reading) -> None:
    if r.busy_s is not None:
        _recent.append(r)


_remember(read())  # so that the first samples of a process, often short, have a start


def _min_window_s() -> float:
    try:
        return MIN_WINDOW_TICKS / os.sysconf("SC_CLK_TCK")
    except (AttributeError, ValueError, OSError):
        return MIN_WINDOW_TICKS / 100


class HostLoadMeter:
    """`with HostLoadMeter() as m: <samples>`; then `m.share` is the other processes'
    share of the cores over the block, or over the moments up to its end where it was too
    short (window_start); None: not known."""

    def __init__(self, path: str = PROC_STAT):
        self.path = path
        self.share: Optional[float] = None
        self._before: Optional[Reading] = None

    def __enter__(self) -> "HostLoadMeter":
        self._before = read(self.path)
        return self

    def __exit__(self, *exc) -> None:
        after, min_window_s = read(self.path), _min_window_s()
        start = window_start(self._before, _recent, after, min_window_s)
        self.share = other_share(start, after, min_window_s) if start else None
        _remember(self._before)
        _remember(after)
