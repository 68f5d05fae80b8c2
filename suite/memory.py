"""Memory is the harness's problem: what a case needs, what the device has, and what an
out-of-memory error leaves behind.

A case's checks hold more than its tensors: the R checked calls' outputs, the
yardstick's, and the float64 golden with its conditioning copy (suite/runner.py,
CaseContext). A case that cannot fit is not the implementation's failure, so the runner
records it as `unsupported` with this estimate before building the golden, and a case
whose tensors alone exceed the device is refused before the run starts (bad input: a size
typo, most likely). An out-of-memory error that still happens is noted here: a worker
process restarts after it, so that the next items start with an empty allocator.
"""

from __future__ import annotations

import gc
import os
from dataclasses import dataclass
from typing import Mapping, Optional

import torch

from bwd_suite.suite.opspec import CaseInputs, OpSpec, tensor_list

GB = 1e9
_oom_seen = False


def total_bytes(device: torch.device) -> Optional[int]:
    """The device's memory: a GPU's, or the host's RAM for the CPU; None if unknown."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).total_memory
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return None


def free_bytes(device: torch.device, reclaim: bool = False) -> Optional[int]:
    """Memory a case can still take: on CUDA what the driver reports free (with `reclaim`,
    after this process's allocator gave back its cached blocks); on the CPU MemAvailable."""
    if device.type == "cuda":
        if reclaim:
            gc.collect()
            torch.cuda.empty_cache()
        return torch.cuda.mem_get_info(device)[0]
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _nbytes(v) -> int:
    return sum(t.numel() * t.element_size() for t in tensor_list(v))


def _nbytes64(v) -> int:
    """Bytes of `v` as the golden holds it: floating tensors widened to float64."""
    return sum(t.numel() * (8 if t.is_floating_point() else t.element_size())
               for t in tensor_list(v))


@dataclass(frozen=True)
class Need:
    """Bytes a case needs beyond its inputs, on the run device and on the golden device
    (the same device: `run` holds the sum)."""

    run: int
    golden: int

    def on(self, device: torch.device, golden_device: torch.device) -> dict:
        if device == golden_device:
            return {device: self.run + self.golden}
        return {device: self.run, golden_device: self.golden}


def case_need(spec: OpSpec, inputs: CaseInputs, params: Mapping, repeats: int) -> Need:
    """What the checks of one case hold beyond its inputs, from the inputs' real sizes.

    Run device: each of the `repeats` checked calls keeps its outputs and its copies of
    the inputs the op updates or consumes, and so does the yardstick's call. Golden
    device: the golden's float64 inputs and outputs, then, while the conditioning runs,
    the golden's outputs, a float64 copy of the inputs and a second set of outputs (or the
    alternate golden's), and the op's own float64 workspace (`OpSpec.golden_workspace`)."""
    empties = spec.empty_outputs(inputs, params)
    out = sum(_nbytes(v) for v in empties.values())
    copies = sum(_nbytes(inputs.tensors[k]) for k in spec.copied)
    in64 = sum(_nbytes64(v) for v in inputs.tensors.values())
    out64 = sum(_nbytes64(empties[o.name]) if o.name in empties
                else _nbytes64(inputs.tensors.get(o.name)) for o in spec.outputs(params))
    del empties
    golden = in64 + 2 * out64
    if spec.golden_workspace is not None:
        golden += spec.golden_workspace(params)
    return Need(run=(repeats + 1) * (out + copies), golden=golden)


def shortfall(need: Need, device: torch.device, golden_device: torch.device) -> Optional[str]:
    """Why the case does not fit the memory free now, with the estimate; None if it does
    (or no device says how much it has)."""
    for dev, n in need.on(device, golden_device).items():
        free = free_bytes(dev)
        if free is not None and n > free:  # cached blocks of earlier cases may free enough
            free = free_bytes(dev, reclaim=True)
        if free is not None and n > free:
            return (f"not enough memory: the case needs about {n / GB:.3g} GB on {dev} beyond "
                    f"its inputs (its checked calls' outputs, the yardstick's, the float64 "
                    f"golden and its conditioning), {free / GB:.3g} GB free")
    return None


def too_large(spec: OpSpec, params: Mapping, device: torch.device) -> Optional[str]:
    """Why a case can never run on `device`, from its compulsory bytes (its tensors read
    and written once) before anything is built: beyond the device's whole memory, or not a
    size at all; None otherwise."""
    try:
        n = spec.bytes(params)
    except (OverflowError, MemoryError, ValueError) as e:
        return f"its sizes do not make tensors ({type(e).__name__}: {e})"
    if not isinstance(n, int) or n < 0 or n >= 2 ** 63:
        return f"its sizes make {n!r} bytes"
    total = total_bytes(device)
    if total is not None and n > total:
        return (f"its tensors alone take about {n / GB:.3g} GB (compulsory bytes), more "
                f"than the {total / GB:.3g} GB of {device}")
    return None


def is_oom(e: BaseException) -> bool:
    return isinstance(e, (torch.OutOfMemoryError, MemoryError))


def note(e: BaseException) -> bool:
    """After `e` was raised: True, and remembered for this process, if it was an
    out-of-memory error; the allocator's cached blocks are given back."""
    global _oom_seen
    if not is_oom(e):
        return False
    _oom_seen = True
    gc.collect()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
    return True


def oom_seen() -> bool:
    """This process ran out of memory at some point: a worker restarts before its next item."""
    return _oom_seen
