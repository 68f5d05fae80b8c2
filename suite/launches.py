"""Kernel launches of one call, counted by the CUDA profiler (docs/timing.md#launches).

A launch is a device-side record of the profiler (torch.profiler with the CUDA activity)
that ran a kernel. Memcpy and memset records (cudaMemcpyAsync, cudaMemsetAsync: a
same-dtype contiguous `copy_`, a `zero_`) are not kernels and are left out, and so are the
other device records (GPU-side user annotations, syncs). The count never fails the item:
whatever goes wrong gives None.
"""

from __future__ import annotations

import os
from typing import Callable, Iterable, Optional

import torch

# kineto's activity types of device records (FunctionEvent.activity_type)
KERNEL, MEMCPY, MEMSET = "kernel", "gpu_memcpy", "gpu_memset"


def _on_cuda(event) -> bool:
    return getattr(event, "device_type", None) == torch.autograd.DeviceType.CUDA


def kind(event) -> Optional[str]:
    """KERNEL, MEMCPY or MEMSET for a device record of the profiler, None for any other
    (host records, annotations, syncs)."""
    if not _on_cuda(event):
        return None
    activity = str(getattr(event, "activity_type", None) or "").lower()  # some say "Kernel"
    if activity:
        return activity if activity in (KERNEL, MEMCPY, MEMSET) else None
    name = str(getattr(event, "name", ""))
    if name.startswith("Memcpy"):
        return MEMCPY
    if name.startswith("Memset"):
        return MEMSET
    return KERNEL


def count_kernels(events: Iterable) -> int:
    """Kernel records among the profiler's events."""
    return sum(kind(e) == KERNEL for e in events)


def _device_events(fn: Callable[[], object], device: torch.device) -> list:
    """The profiler's events of one call of fn on CUDA `device`: the device's earlier work
    (the setup's copies) finished before, the call's own inside the profile."""
    from torch.profiler import ProfilerActivity, profile

    # a CUPTI left attached after the profiler stops slows every later call (pytorch
    # issue 144455): later items of the process are timed, so have it torn down
    os.environ.setdefault("TEARDOWN_CUPTI", "1")
    index = device.index if device.index is not None else torch.cuda.current_device()
    with torch.cuda.device(index):
        torch.cuda.synchronize(index)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize(index)
    return list(prof.events())


def count_launches(fn: Callable[[], object], device: torch.device | str,
                   setup: Optional[Callable[[], object]] = None) -> Optional[int]:
    """Kernels one call of fn launches on CUDA device `device`, `setup()` run first outside
    the profiler; None off CUDA or when the setup, the profiler or the call fails."""
    device = torch.device(device)
    if device.type != "cuda":
        return None
    try:
        if setup is not None:
            setup()
        return count_kernels(_device_events(fn, device))
    except Exception:  # noqa: BLE001 - a count that cannot be made is null, not an error
        return None
