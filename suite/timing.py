"""Time one call (a backward pass) properly: warm-up, cold L2, device-side clocks, all samples.

On CUDA the clock is a pair of `torch.cuda.Event`s around only `fn()`; host-side timers would
measure launch overhead and queueing instead of the kernel. Before every sample the L2 is
flushed by a pass over a 256 MiB buffer (an H200 has 50 MiB of L2), outside the events. One
spin (`torch.cuda._sleep`, as nvbench's blocking kernel) holds the GPU while the host
enqueues every sample; the GPU then runs them back to back, each fn() right after its
flush, so the events time GPU work, not launch gaps, and every implementation's fn() starts
in the same state whatever its host cost. A fn that synchronizes inside cannot be enqueued
ahead: its samples are recorded as paced "outrun" (so are any whose hold the host outran
even when taken again behind a longer one). The samples' events are read after one
synchronize at the end (with no warm-up, also after the first sample, which then sizes the
time budget).

The warm-up is at least `warmup` calls and, on CUDA, at least `warmup_s` of their time
(25 ms by default, as `triton.testing.do_bench`): with a few calls alone, the implementation
timed first in a case ran slower than the same kernel timed last (docs/timing.md#warm-up).
The single hold replaced a spin before each sample, whose length depended on the
implementation's host time and so on the order of implementations (docs/timing.md#pacing).

The flush (`l2_flush`, docs/timing.md#l2-flush):
- "clean" (the default) reads the buffer: the case's lines are evicted, and the lines left
  in the L2 are clean, so the timed call writes back only its own data.
- "dirty" zeroes it, as `triton.testing.do_bench` does (nvbench's memset likewise): the case
  is as cold, but the L2 is left full of the flush's dirty lines, which the timed call
  writes back as it evicts them: a cost set by the L2's size, not by the work timed.
- "none": no flush (data of the previous sample may still be cached).

On CPU the clock is `time.perf_counter` around each call, with no flush ("none").

Around the samples (not the warm-up, whose first calls may compile in other processes),
on CPU and CUDA alike, `suite.host_load` measures the share of the cores that other
processes kept busy: the Timing's `host_load` (docs/timing.md#host-load).

`wall_time` is the other clock: the host's time of a call until the device has finished it,
as a training loop waits for it (no flush, no hold, so launch gaps and host work count).
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from bwd_suite.suite.host_load import HostLoadMeter

L2_FLUSH_BYTES = 256 * 1024 * 1024
L2_FLUSH_MODES = ("clean", "dirty", "none")
# torch.utils.benchmark warns when the interquartile range exceeds this share of the median.
NOISY_IQR_RATIO = 0.10
# Fewer samples than this make the median and IQR meaningless, unless one call alone
# overruns the time budget.
MIN_SAMPLES = 3
# Timing.method of each clock; suite/regression.py holds a copy of CPU_METHOD (it does not
# import torch) and applies the host-load rule to it alone.
CPU_METHOD, CUDA_METHOD = "perf_counter", "cuda_events"

# One flush buffer per CUDA device index, allocated on first use and kept: reallocating
# 256 MiB per call would put allocator work next to the timed region.
_flush_buffers: dict[int, torch.Tensor] = {}
# The clean flush's sum lands here (one per device index): no allocation per sample.
_flush_sinks: dict[int, torch.Tensor] = {}
_SPIN_CALIBRATION_CYCLES = 200_000  # 0.1 ms at full clock
# The hold lasts _HOLD_MARGIN times the host's time to enqueue the samples (estimated from
# the last warm-up call) plus _HOLD_BASE_S, at most _MAX_HOLD_S. Where the host still
# outran it, the samples are taken again (once) behind _RETRY_MARGIN times the enqueue time
# just measured, if that fits under _MAX_HOLD_S and the fn did not wait for the GPU (one
# that synchronizes inside waits for any hold: its first call outlasts the hold).
# Recorded per row (results' timing_pacing): "hold", or "outrun" where the last hold ended
# before the host had enqueued every sample (the GPU may have waited for launches);
# "spacer" before the hold.
CUDA_PACING, CUDA_OUTRUN = "hold", "outrun"
_HOLD_MARGIN = 4
_HOLD_BASE_S = 1e-3
_RETRY_MARGIN = 2
_MAX_HOLD_S = 0.25
DEFAULT_WARMUP_S = 0.025


def check_l2_flush(mode: str) -> None:
    if mode not in L2_FLUSH_MODES:
        raise ValueError(f"l2_flush must be one of {L2_FLUSH_MODES}, got {mode!r}")


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """The q-quantile of already sorted values, interpolating linearly between the two
    nearest ranks (numpy.percentile's default, "linear")."""
    if not sorted_values:
        raise ValueError("quantile of no values")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q must lie in [0, 1], got {q}")
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


@dataclass(frozen=True)
class Timing:
    method: str  # CUDA_METHOD or CPU_METHOD
    samples_s: tuple  # every kept sample, seconds, in the order measured
    warmup: int  # warm-up calls made before the first sample (on CUDA, as warmup_s asked)
    l2_flush: str  # how the L2 was flushed before each sample: L2_FLUSH_MODES
    # CUDA: how the GPU was kept ahead of the host: CUDA_PACING, or CUDA_OUTRUN where the
    # hold ended before the host had enqueued every sample
    pacing: str | None = None
    # share of the cores other processes kept busy during the samples (suite.host_load);
    # None where it could not be read
    host_load: float | None = None

    def __post_init__(self) -> None:
        if not self.samples_s:
            raise ValueError("a Timing needs at least one sample")
        check_l2_flush(self.l2_flush)
        object.__setattr__(self, "samples_s", tuple(float(s) for s in self.samples_s))

    @property
    def _sorted(self) -> list[float]:
        return sorted(self.samples_s)

    @property
    def median_s(self) -> float:
        return quantile(self._sorted, 0.5)

    @property
    def iqr_s(self) -> float:
        s = self._sorted
        return quantile(s, 0.75) - quantile(s, 0.25)

    @property
    def min_s(self) -> float:
        return min(self.samples_s)

    @property
    def noisy(self) -> bool:
        # Multiplied out rather than divided, so a zero median does not raise.
        return self.iqr_s > NOISY_IQR_RATIO * self.median_s


def _min_samples(repeats: int, call_s: float, max_time_s: float) -> int:
    return min(repeats, 1 if call_s > max_time_s else MIN_SAMPLES)


def _time_cpu(fn: Callable[[], object], warmup: int, repeats: int,
              max_time_s: float, setup: Callable[[], object] = lambda: None) -> Timing:
    for _ in range(warmup):
        setup()
        fn()
    samples: list[float] = []
    with HostLoadMeter() as load:
        began = time.perf_counter()
        while len(samples) < repeats:
            setup()
            t0 = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - t0)
            spent = time.perf_counter() - began
            if (spent > max_time_s
                    and len(samples) >= _min_samples(repeats, samples[0], max_time_s)):
                break
    return Timing(method=CPU_METHOD, samples_s=tuple(samples), warmup=warmup,
                  l2_flush="none", host_load=load.share)


def _kept(store: dict, index: int, make: Callable[[str], torch.Tensor]) -> torch.Tensor:
    """store[index], made on CUDA device `index` on first use and kept."""
    if index not in store:
        store[index] = make(f"cuda:{index}")
    return store[index]


def _flush_buffer(index: int) -> torch.Tensor:
    return _kept(_flush_buffers, index,
                 lambda dev: torch.zeros(L2_FLUSH_BYTES // 4, dtype=torch.int32, device=dev))


def flush_l2(buf: torch.Tensor, mode: str, sink: torch.Tensor | None = None) -> None:
    """One pass over `buf` as `mode` asks (module docstring): "clean" sums it into `sink`
    (a 0-d int64 tensor on buf's device; buf is left as it was), "dirty" zeroes it."""
    if mode == "clean":
        torch.sum(buf, dim=0, out=sink)
    elif mode == "dirty":
        buf.zero_()
    else:
        check_l2_flush(mode)


def _flush_sink(index: int) -> torch.Tensor:
    return _kept(_flush_sinks, index, lambda dev: torch.zeros((), dtype=torch.int64, device=dev))


def spin_rate() -> float | None:
    """Cycles per second of torch.cuda._sleep on the current device, None where torch lacks
    it. The spin counts cycles and the clock changes with load (an idle H200 runs at 345 MHz,
    a busy one near 1980), so this is measured in every call, after the warm-up."""
    if not hasattr(torch.cuda, "_sleep"):
        return None
    torch.cuda._sleep(1000)  # the first launch may load the kernel; keep it untimed
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(_SPIN_CALIBRATION_CYCLES)
    end.record()
    end.synchronize()
    return _SPIN_CALIBRATION_CYCLES / (start.elapsed_time(end) / 1e3)


def _time_cuda(fn: Callable[[], object], device: torch.device, warmup: int, warmup_s: float,
               repeats: int, max_time_s: float, l2_flush: str,
               setup: Callable[[], object] = lambda: None) -> Timing:
    index = device.index if device.index is not None else torch.cuda.current_device()
    # Events record on the current stream of the current device; make that `device`.
    with torch.cuda.device(index):
        buf = _flush_buffer(index) if l2_flush != "none" else None
        sink = _flush_sink(index) if l2_flush == "clean" else None

        def sample():
            pre, start, end = (torch.cuda.Event(enable_timing=True) for _ in range(3))
            setup()  # before pre: neither the device nor the host time includes it
            t0 = time.perf_counter()
            pre.record()
            if buf is not None:  # outside start..end: only fn() is timed
                flush_l2(buf, l2_flush, sink)
            start.record()
            fn()
            end.record()
            return (pre, start, end), time.perf_counter() - t0

        warm = [sample() for _ in range(warmup)]
        torch.cuda.synchronize(index)
        made = len(warm)
        if warm and warmup_s > 0:
            # Top the warm-up up to warmup_s, sized by its last call: the GPU's time or the
            # host's, whichever is longer, so a host-bound fn does not loop for long.
            (pre, _, end), host_s = warm[-1]
            per_s = max(pre.elapsed_time(end) / 1e3, host_s, 1e-6)
            target = math.ceil(warmup_s / per_s)
            while made < target:
                warm[-1] = sample()  # only the last one is the estimate below
                made += 1
            torch.cuda.synchronize(index)
        kept = []  # events of a sample taken before the hold
        if not warm:
            # Nothing to learn from: the first sample, kept, is the estimate.
            warm = [sample()]
            kept = [warm[0][0]]
            torch.cuda.synchronize(index)
        rate = spin_rate()

        # The last warm-up call is the estimate: the first may include compilation or
        # autotuning. The host runs ahead of the GPU, so a host clock cannot size the budget.
        (pre, start, end), host_s = warm[-1]
        iter_s = pre.elapsed_time(end) / 1e3
        call_s = start.elapsed_time(end) / 1e3
        planned = repeats - len(kept)
        if iter_s * repeats > max_time_s:
            planned = max(_min_samples(repeats, call_s, max_time_s),
                          min(repeats, math.floor(max_time_s / iter_s))) - len(kept)

        def held_samples(hold_s: float):
            """`planned` samples behind a spin of hold_s; whether the spin ended before the
            host had enqueued them all (the GPU may then have waited for a launch), the
            host's time to enqueue them, and its time for the first call."""
            held = None
            if rate:  # (a torch without _sleep: no hold, the GPU may wait for launches)
                torch.cuda._sleep(int(hold_s * rate))
                held = torch.cuda.Event()
                held.record()
            began = time.perf_counter()
            events, first_s = [], 0.0
            while len(events) < planned:
                ev, call_host_s = sample()
                events.append(ev)
                first_s = first_s or call_host_s
                # Backstop for a host-bound fn: the samples take at least as long as the
                # host took to enqueue them.
                if (time.perf_counter() - began > max_time_s
                        and len(events) + len(kept) >= MIN_SAMPLES):
                    break
            outrun = held is not None and held.query()
            return events, outrun, time.perf_counter() - began, first_s

        hold_s = min(_HOLD_MARGIN * planned * host_s + _HOLD_BASE_S, _MAX_HOLD_S)
        with HostLoadMeter() as load:
            events, outrun, enqueue_s, first_s = (held_samples(hold_s) if planned > 0
                                                  else ([], False, 0.0, 0.0))
            retry_s = _RETRY_MARGIN * enqueue_s + _HOLD_BASE_S
            # A first call far over the warm-up's host time waited for the spin: the fn
            # synchronizes, and a longer hold would only be waited for too.
            waited = first_s > max(2 * host_s, hold_s / 2)
            if outrun and not waited and retry_s <= _MAX_HOLD_S:
                torch.cuda.synchronize(index)
                events, outrun, _, _ = held_samples(retry_s)
            torch.cuda.synchronize(index)
        samples = tuple(start.elapsed_time(end) / 1e3 for _, start, end in kept + events)
    pacing = None if not rate else CUDA_OUTRUN if outrun else CUDA_PACING
    return Timing(method=CUDA_METHOD, samples_s=samples, warmup=made, l2_flush=l2_flush,
                  pacing=pacing, host_load=load.share)


def time_call(fn: Callable[[], object], device: torch.device | str, *, warmup: int = 3,
              warmup_s: float = DEFAULT_WARMUP_S, repeats: int = 20, max_time_s: float = 2.0,
              l2_flush: str = "clean",
              setup: Callable[[], object] | None = None) -> Timing:
    """Time `fn()` on `device`: `warmup` untimed calls (on CUDA, more until they have taken
    `warmup_s`; `warmup=0` means none at all), then up to `repeats` timed ones,
    fewer once the samples have taken more than `max_time_s` (but at least 3, or 1 when a
    single call overruns the budget), each after an L2 flush of the kind `l2_flush` names
    (CUDA only; module docstring), with the host's load over the samples
    (`host_load`). `setup()`, if given, runs before every call, warm-up
    included, outside the timed region (restoring inputs an op updates in place).
    Every sample is kept. That `fn` does real work (no
    all-zero inputs, no skipped kernels) is the caller's job."""
    check_l2_flush(l2_flush)
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    if not warmup_s >= 0:
        raise ValueError(f"warmup_s must be >= 0, got {warmup_s}")
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    if not max_time_s > 0:
        raise ValueError(f"max_time_s must be > 0, got {max_time_s}")
    device = torch.device(device)
    setup = setup or (lambda: None)
    if device.type == "cpu":
        return _time_cpu(fn, warmup, repeats, max_time_s, setup)
    if device.type == "cuda":
        return _time_cuda(fn, device, warmup, warmup_s, repeats, max_time_s, l2_flush, setup)
    raise ValueError(f"cannot time on device type {device.type!r}; expected cpu or cuda")


WALL_MAX_SAMPLES = 20


def wall_time(fn: Callable[[], object], device: torch.device | str, *, repeats: int = 20,
              setup: Callable[[], object] | None = None) -> float:
    """Median seconds, over min(repeats, WALL_MAX_SAMPLES) calls, from just before `fn()`
    to the end of the device work it queued (a synchronize on CUDA), `setup()` and the
    device's earlier work outside. No warm-up: call it after `time_call` has warmed up."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    device = torch.device(device)
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        sync = lambda: torch.cuda.synchronize(index)  # noqa: E731
        on_device = torch.cuda.device(index)
    elif device.type == "cpu":
        sync, on_device = (lambda: None), contextlib.nullcontext()
    else:
        raise ValueError(f"cannot time on device type {device.type!r}; expected cpu or cuda")
    setup = setup or (lambda: None)
    samples = []
    with on_device:
        for _ in range(min(repeats, WALL_MAX_SAMPLES)):
            setup()
            sync()
            t0 = time.perf_counter()
            fn()
            sync()
            samples.append(time.perf_counter() - t0)
    return quantile(sorted(samples), 0.5)
