"""Time, FLOPs and kernel launches per stage of a training step (forward, loss, backward,
optimizer), each measured on its own pass of whole steps so that no tool slows another's.

- time: CUDA events around each stage (one synchronisation at the end of the step), or
  the host clock on a CPU; the median over the timed steps, after one untimed step;
- FLOPs: torch.utils.flop_counter.FlopCounterMode around each stage of one step: exact
  counts of the matrix products and convolutions (its formulas; elementwise work counts
  nothing), and per module for the forward, so that the FLOPs a checkpointed layer
  recomputes in the backward can be checked exactly (`recomputed`); an op's backward
  that runs no aten op (a compiled kernel) counts its op's own FLOPs (OpSpec.flops,
  elementwise work included: backends.unseen_flops);
- launches: the CUDA profiler around each stage of one step, kernels only
  (suite/launches.py's count; memcpy and memset left out); none on a CPU.
"""

from __future__ import annotations

import contextlib
import os
import re
import statistics
import time
from typing import Callable, Optional

import torch

from bwd_suite.suite.launches import count_kernels
from bwd_suite.suite.step.backends import unseen_flops

STAGES = ("forward", "loss", "backward", "optimizer")


class _Timer:
    def __init__(self, device: torch.device):
        self.device, self.spans = device, {}

    @contextlib.contextmanager
    def __call__(self, name: str):
        if self.device.type == "cuda":
            start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
            start.record()
            yield
            end.record()
            self.spans.setdefault(name, []).append((start, end))
        else:
            t0 = time.perf_counter()
            yield
            self.spans.setdefault(name, []).append(time.perf_counter() - t0)

    def seconds(self) -> dict:
        """{stage: seconds of this step} (micro-batches of a stage added)."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            return {k: sum(s.elapsed_time(e) for s, e in v) / 1e3 for k, v in self.spans.items()}
        return {k: sum(v) for k, v in self.spans.items()}


class _Flops:
    def __init__(self):
        self.total, self.modules = {}, {}

    @contextlib.contextmanager
    def __call__(self, name: str):
        from torch.utils.flop_counter import FlopCounterMode

        with FlopCounterMode(display=False) as counter, unseen_flops(counter) as unseen:
            yield
        self.total[name] = self.total.get(name, 0) + counter.get_total_flops() + unseen[0]
        if name == "forward":
            for module, ops in counter.get_flop_counts().items():
                self.modules[module] = self.modules.get(module, 0) + sum(ops.values())


class _Launches:
    def __init__(self, device: torch.device):
        self.device, self.count = device, {}

    @contextlib.contextmanager
    def __call__(self, name: str):
        from torch.profiler import ProfilerActivity, profile

        # a CUPTI left attached slows every later call (suite/launches.py)
        os.environ.setdefault("TEARDOWN_CUPTI", "1")
        torch.cuda.synchronize(self.device)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            yield
            torch.cuda.synchronize(self.device)
        self.count[name] = self.count.get(name, 0) + count_kernels(prof.events())


def recomputed(modules: dict, patterns: dict, checkpoint) -> int:
    """FLOPs of the forward of every checkpointed layer (FlopCounterMode's per-module
    counts of a plain step; `patterns` the model's layer -> module-name regex), outermost
    layers only (a checkpointed block recomputes the mixer inside it once)."""
    names = [m for m in modules if any(re.search(patterns[k], m) for k in checkpoint
                                       if k in patterns)]
    outer = [m for m in names if not any(m != o and m.startswith(o + ".") for o in names)]
    return sum(modules[m] for m in outer)


def measure(step: Callable[[int, Callable], object], device, timed_steps: int = 3,
            first_step: int = 1) -> dict:
    """{"stages": {stage: {"time_ms", "flops", "launches"}}, "forward_modules": {module:
    flops}, "timed_steps": n, "step_samples_s": [the timed steps' seconds], "timing",
    "last_step"} of `step(t, stages)` (a Run's step), one untimed step first."""
    device = torch.device(device)
    t = first_step
    step(t, _Timer(device))  # warm: allocator, kernels built, caches
    times = {k: [] for k in STAGES}
    totals = []  # seconds of each timed step, its stages together
    for _ in range(timed_steps):
        t += 1
        timer = _Timer(device)
        step(t, timer)
        seconds = timer.seconds()
        for k, v in seconds.items():
            times[k].append(v)
        totals.append(sum(seconds.values()))
    t += 1
    flops = _Flops()
    step(t, flops)
    launches: Optional[_Launches] = None
    if device.type == "cuda":
        t += 1
        launches = _Launches(device)
        step(t, launches)
    stages = {k: {"time_ms": statistics.median(times[k]) * 1e3 if times[k] else None,
                  "flops": flops.total.get(k, 0),
                  "launches": launches.count.get(k) if launches else None}
              for k in STAGES}
    return {"stages": stages, "forward_modules": flops.modules, "timed_steps": timed_steps,
            "step_samples_s": totals,
            "timing": "cuda_events" if device.type == "cuda" else "perf_counter",
            "last_step": t}
