"""Bytes moved vs time taken, against the machine's ceilings.

The memory ceiling is a measured device-to-device copy bandwidth (bytes read + bytes written,
as the kernels' byte counts are), cached per device name in a calibration file; the datasheet
bandwidth is a lead, not a ceiling a kernel can reach. The compute ceiling comes from the
datasheet: the ops here are elementwise fp32 work, so the fp32 non-tensor-core rate applies.
"""

from __future__ import annotations

import json
import os
import platform
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import torch

from bwd_suite.suite.timing import time_call

# How the calibration copy is timed: after a clean L2 flush (suite/timing.py), so that it
# writes back only its own data. Entries measured otherwise (before the flush had kinds, the
# calibration ran unflushed, behind the previous sample's dirty lines) are measured again.
CALIBRATION_FLUSH = "clean"

GB = 1e9
TFLOP = 1e12


@dataclass(frozen=True)
class Datasheet:
    copy_gbps: float  # HBM bandwidth
    fp32_tflops: float  # non-tensor-core
    bf16_dense_tflops: float  # tensor core, no sparsity


# Vendor datasheet numbers for the SXM parts: leads, not measurements. PCIe and smaller-memory
# variants are slower (an H100 PCIe has 2000 GB/s, an A100 40GB 1555 GB/s).
# Keyed by a substring of torch.cuda.get_device_name().
DATASHEET: dict[str, Datasheet] = {
    "H200": Datasheet(copy_gbps=4800, fp32_tflops=67, bf16_dense_tflops=989),
    "H100": Datasheet(copy_gbps=3350, fp32_tflops=67, bf16_dense_tflops=989),
    "A100": Datasheet(copy_gbps=2039, fp32_tflops=19.5, bf16_dense_tflops=312),
}


def datasheet(name: str) -> Datasheet | None:
    """The datasheet entry whose key occurs in `name`; the longest key wins."""
    for key in sorted(DATASHEET, key=len, reverse=True):
        if key.lower() in name.lower():
            return DATASHEET[key]
    return None


@dataclass(frozen=True)
class Ceilings:
    device_name: str
    copy_gbps: float | None  # measured device copy bandwidth, GB/s, bytes read + written
    copy_source: str  # "measured <iso date>", "datasheet" or "none"
    peak_tflops: float | None  # datasheet fp32 rate

    @property
    def balance(self) -> float | None:
        """Machine balance, flops per byte: below it a kernel is memory bound."""
        if not self.copy_gbps or not self.peak_tflops:
            return None
        return self.peak_tflops * TFLOP / (self.copy_gbps * GB)


@dataclass(frozen=True)
class Roofline:
    bytes: int
    flops: int
    median_s: float | None
    gbps: float | None
    frac_copy_bw: float | None  # gbps / measured copy bandwidth
    arith_intensity: float | None  # flops per byte
    bound: str | None  # "memory", "compute", or None when a ceiling is unknown


def roofline(bytes: int, flops: int, median_s: float | None, ceilings: Ceilings) -> Roofline:
    gbps = bytes / median_s / GB if median_s else None
    frac = gbps / ceilings.copy_gbps if gbps is not None and ceilings.copy_gbps else None
    ai = flops / bytes if bytes > 0 else None
    balance = ceilings.balance
    bound = None
    if ai is not None and balance is not None:
        bound = "memory" if ai < balance else "compute"
    return Roofline(bytes=bytes, flops=flops, median_s=median_s, gbps=gbps, frac_copy_bw=frac,
                    arith_intensity=ai, bound=bound)


def device_name(device: torch.device | str) -> str:
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return platform.processor() or device.type


def _copy_buffers(device: torch.device, size_bytes: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A source of `size_bytes` random bytes and a destination like it. Random bytes from a
    private generator: no all-zero data, and the caller's RNG stream is left untouched."""
    gen = torch.Generator(device=device).manual_seed(0)
    src = torch.empty(size_bytes, dtype=torch.uint8, device=device).random_(0, 256,
                                                                           generator=gen)
    return src, torch.empty_like(src)


def measure_copy_bandwidth(device: torch.device | str, size_bytes: int | None = None,
                           repeats: int = 20) -> float:
    """GB/s of `dst.copy_(src)` on `device`, counting bytes read + bytes written."""
    device = torch.device(device)
    if size_bytes is None:
        # Far beyond any cache: the copy streams from memory.
        size_bytes = (2 if device.type == "cuda" else 0.25) * 2**30
    size_bytes = int(size_bytes)
    if size_bytes < 1:
        raise ValueError(f"size_bytes must be >= 1, got {size_bytes}")
    src, dst = _copy_buffers(device, size_bytes)
    timing = time_call(lambda: dst.copy_(src), device, repeats=repeats,
                       l2_flush=CALIBRATION_FLUSH)
    return 2 * size_bytes / timing.median_s / GB


# (device, bytes, timing options) -> median seconds of the same-bytes copy (None: it did not
# fit), per process
_same_bytes_copies: dict[tuple, float | None] = {}


def same_bytes_copy_s(device: torch.device | str, nbytes: int | None,
                      **timing) -> float | None:
    """Median seconds of a device copy moving `nbytes` (nbytes / 2 read, as many written),
    timed as the cases are (`time_call` with `timing`'s options: cold L2, events around
    the copy alone). The calibrated copy bandwidth is the asymptote of a 2 GiB copy; a call
    of a case's size also pays the method's fixed cost (on an H200 a one-element kernel
    times 3.7 us; after the clean flush a copy of 201 MB reaches 0.97 of the calibrated
    bandwidth, one of 50 MB 0.75: docs/timing.md#same-bytes-copy), so this time
    is a yardstick of the case's size for a kernel moving those bytes (not a ceiling:
    kernels beat torch's copy). Measured once per device, byte count and timing options
    in a process; None below 2 bytes or when the two buffers do not fit in memory."""
    device = torch.device(device)
    if nbytes is None or nbytes < 2:
        return None
    key = (str(device), int(nbytes), tuple(sorted(timing.items())))
    if key not in _same_bytes_copies:
        try:
            src, dst = _copy_buffers(device, int(nbytes) // 2)
        except (torch.cuda.OutOfMemoryError, MemoryError):
            _same_bytes_copies[key] = None
        else:
            median = time_call(lambda: dst.copy_(src), device, **timing).median_s
            del src, dst
            _same_bytes_copies[key] = median
    return _same_bytes_copies[key]


def calibration_path() -> Path:
    root = os.environ.get("BWD_SUITE_CACHE")
    if root:
        return Path(root) / "calibration.json"
    return Path.home() / ".cache" / "bwd-suite" / "calibration.json"


def _read_calibration(path: Path) -> dict:
    # A missing or damaged cache means "not calibrated", not a failed run.
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def save_calibration(device_name: str, copy_gbps: float) -> Path:
    """Record a measured copy bandwidth for `device_name`, keeping the other devices'
    entries. The file is replaced atomically, so a reader never sees half of it."""
    path = calibration_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    data = _read_calibration(path)
    data[device_name] = {
        "copy_gbps": float(copy_gbps),
        "l2_flush": CALIBRATION_FLUSH,
        "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "torch": torch.__version__,
    }
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".calibration-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=2, sort_keys=True)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return path


def load_ceilings(device: torch.device | str, *, datasheet_copy: bool = False) -> Ceilings:
    """The ceilings for `device`: copy bandwidth from the calibration cache, peak flops from
    the datasheet. With `datasheet_copy`, an uncalibrated GPU falls back to the datasheet
    bandwidth (copy_source "datasheet"), which real copies do not reach."""
    device = torch.device(device)
    name = device_name(device)
    sheet = datasheet(name) if device.type == "cuda" else None
    peak = sheet.fp32_tflops if sheet else None
    entry = _read_calibration(calibration_path()).get(name)
    if isinstance(entry, dict) and entry.get("l2_flush") == CALIBRATION_FLUSH:
        gbps = entry.get("copy_gbps")
        if isinstance(gbps, (int, float)) and not isinstance(gbps, bool) and gbps > 0:
            date = str(entry.get("measured_at", ""))[:10] or "unknown date"
            return Ceilings(name, float(gbps), f"measured {date}", peak)
    if datasheet_copy and sheet:
        return Ceilings(name, float(sheet.copy_gbps), "datasheet", peak)
    return Ceilings(name, None, "none", peak)


def calibrate(device: torch.device | str, size_bytes: int | None = None) -> Ceilings:
    """Measure the copy bandwidth of `device` (copies of `size_bytes`, default
    measure_copy_bandwidth's), save it, and return the ceilings."""
    device = torch.device(device)
    save_calibration(device_name(device), measure_copy_bandwidth(device, size_bytes))
    return load_ceilings(device)


def no_ceilings(device) -> Ceilings:
    """Ceilings of a run that computes no roofline (correctness only, or no calibration)."""
    return Ceilings(device_name=str(device), copy_gbps=None, copy_source="none",
                    peak_tflops=None)
