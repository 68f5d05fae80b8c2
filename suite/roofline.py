"""Bytes moved and flops done vs time taken, against the machine's measured ceilings.

The memory ceiling is a measured device-to-device copy bandwidth (bytes read + bytes written,
as the kernels' byte counts are); the compute ceiling of a case is the measured dense GEMM
rate of its dtype (`Ceilings.compute_peak`: bf16 and fp16 on the tensor cores, fp32 with
TF32 off). Both are cached per device name in a calibration file. Datasheet numbers are
leads, not ceilings a kernel can reach: only fp32 falls back to one, where no fp32 GEMM was
measured. A case whose arithmetic intensity reaches the ridge point (compute peak / copy
bandwidth) is compute bound and judged by its fraction of the compute peak; below it, by its
fraction of the copy bandwidth (docs/timing.md#roofline).
"""

from __future__ import annotations

import json
import math
import os
import platform
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator, Mapping, Optional

import torch

from bwd_suite.suite.timing import time_call

# How the calibration copy is timed: after a clean L2 flush (suite/timing.py), so that it
# writes back only its own data. Entries measured otherwise (before the flush had kinds, the
# calibration ran unflushed, behind the previous sample's dirty lines) are measured again.
CALIBRATION_FLUSH = "clean"

GB = 1e9
TFLOP = 1e12

# The dtypes (suite.inputs.DTYPES names) whose dense GEMM rate `calibrate` measures on CUDA,
# and the size of the square matmul: 8192^3 keeps an H100's tensor cores busy for about
# 1.4 ms a call in bf16 (778 TFLOP/s there) and needs 3 x 256 MiB in fp32. fp32 is measured
# with TF32 off: an fp32 case's kernels compute in fp32 unless they say otherwise.
GEMM_DTYPES = ("bfloat16", "float16", "float32")
GEMM_SIZE = 8192
GEMM_MIN_SIZE = 1024  # sized down to this, halving, when the operands do not fit
GEMM_REPEATS = 10  # samples per dtype; the best one counts (a rate no call can exceed)


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
    peak_tflops: float | None  # datasheet fp32 non-tensor-core rate: fp32's fallback
    # measured dense GEMM rate per dtype name (GEMM_DTYPES), TFLOP/s; empty: not measured
    gemm_tflops: Mapping[str, float] = field(default_factory=dict)
    gemm_source: str = "none"  # "measured <iso date>" or "none"

    def __hash__(self) -> int:  # frozen, so hashable, though the rates are a (picklable) dict
        return hash((self.device_name, self.copy_gbps, self.copy_source, self.peak_tflops,
                     tuple(sorted(self.gemm_tflops.items())), self.gemm_source))

    def compute_peak(self, dtype: Optional[str]) -> float | None:
        """The compute ceiling of a case in `dtype` (a suite.inputs.DTYPES name, the op's
        `dtype_param`), TFLOP/s: the measured dense GEMM rate of that dtype (bf16 and fp16
        on the tensor cores, fp32 with TF32 off). fp32 (and a case without a dtype) falls
        back to the datasheet fp32 rate where no fp32 GEMM was measured; any other dtype
        without a measurement (fp64, or everything on a CPU) has none."""
        dtype = dtype or "float32"
        measured = self.gemm_tflops.get(dtype)
        if measured:
            return float(measured)
        return self.peak_tflops if dtype == "float32" else None

    def balance(self, dtype: Optional[str] = None) -> float | None:
        """The ridge point of a case in `dtype`, flops per byte: its compute peak over the
        copy bandwidth. Below it a kernel is memory bound."""
        peak = self.compute_peak(dtype)
        if not self.copy_gbps or not peak:
            return None
        return peak * TFLOP / (self.copy_gbps * GB)


@dataclass(frozen=True)
class Roofline:
    bytes: int | None
    flops: int | None
    median_s: float | None
    gbps: float | None
    frac_copy_bw: float | None  # gbps / measured copy bandwidth
    arith_intensity: float | None  # flops per byte
    bound: str | None  # "memory", "compute", or None when a ceiling is unknown
    tflops: float | None = None  # flops / median time, 1e12 a second
    peak_tflops: float | None = None  # the case dtype's compute ceiling (compute_peak)
    frac_peak_flops: float | None = None  # tflops / peak_tflops


def roofline(bytes: int | None, flops: int | None, median_s: float | None,
             ceilings: Ceilings, dtype: Optional[str] = None) -> Roofline:
    """The roofline columns of a case of `bytes` and `flops` timed at `median_s` (None:
    untimed), in `dtype` (the op's dtype_param value; None: the fp32 rate, as before the
    GEMM peaks were measured). Both fractions are given wherever their ceiling is known;
    `bound` says which one the case is judged by."""
    timed = bool(median_s) and median_s > 0
    gbps = bytes / median_s / GB if timed and bytes is not None else None
    frac = gbps / ceilings.copy_gbps if gbps is not None and ceilings.copy_gbps else None
    tflops = flops / median_s / TFLOP if timed and flops is not None else None
    peak = ceilings.compute_peak(dtype)
    frac_peak = tflops / peak if tflops is not None and peak else None
    ai = flops / bytes if bytes and flops is not None and bytes > 0 else None
    balance = ceilings.balance(dtype)
    bound = None
    if ai is not None and balance is not None:
        bound = "memory" if ai < balance else "compute"
    return Roofline(bytes=bytes, flops=flops, median_s=median_s, gbps=gbps, frac_copy_bw=frac,
                    arith_intensity=ai, bound=bound, tflops=tflops, peak_tflops=peak,
                    frac_peak_flops=frac_peak)


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


@contextmanager
def _fp32_without_tf32() -> Iterator[None]:
    """fp32 matmuls in full fp32 (no TF32) inside, the process's setting restored after.
    Left alone when already so (torch's default): torch refuses a mix of its legacy and new
    TF32 switches, so the legacy one is set only when it has to be."""
    before = torch.get_float32_matmul_precision()
    if before == "highest":
        yield
        return
    torch.set_float32_matmul_precision("highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


def _gemm_operands(device: torch.device, dtype: torch.dtype, n: int) -> tuple:
    """a, b (n x n, standard normal from a private generator: no zeros, the caller's RNG
    stream untouched) and an output like them."""
    gen = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(n, n, device=device, dtype=dtype, generator=gen)
    b = torch.randn(n, n, device=device, dtype=dtype, generator=gen)
    return a, b, torch.empty_like(a)


@dataclass(frozen=True)
class GemmRate:
    tflops: float  # 2 n^3 / the best sample, 1e12 a second
    n: int  # the size measured (GEMM_SIZE unless the operands did not fit)


def measure_gemm_tflops(device: torch.device | str, dtype: str, n: int = GEMM_SIZE,
                        repeats: int = GEMM_REPEATS) -> GemmRate | None:
    """The dense GEMM rate of `device` in `dtype` (a suite.inputs.DTYPES name): the square
    matmul `torch.matmul(a, b, out=c)` of n x n operands, 2 n^3 flops a call, timed with the
    suite's timer (time_call: warm-up, the calibration's L2 flush outside the timed region),
    rated by the best of `repeats` samples: the ceiling is the rate the device reaches, not
    its average under noise. fp32 runs with TF32 off. Where the operands do not fit, n
    halves down to GEMM_MIN_SIZE (or n itself, when smaller); None when even that does not
    fit. Works on any device; `calibrate` measures it on CUDA only (a CPU's rate is not a
    ceiling of the kernels under test)."""
    from bwd_suite.suite.inputs import DTYPES

    device = torch.device(device)
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r} is not one of {', '.join(DTYPES)}")
    if n < 1 or repeats < 1:
        raise ValueError(f"n and repeats must be >= 1, got {n} and {repeats}")
    while True:
        try:
            a, b, c = _gemm_operands(device, DTYPES[dtype], n)
            break
        except (torch.cuda.OutOfMemoryError, MemoryError):
            if device.type == "cuda":
                torch.cuda.empty_cache()
            if n // 2 < GEMM_MIN_SIZE:
                return None
            n //= 2
    with _fp32_without_tf32():
        timing = time_call(lambda: torch.matmul(a, b, out=c), device, repeats=repeats,
                           l2_flush=CALIBRATION_FLUSH)
    del a, b, c
    return GemmRate(tflops=2 * n**3 / timing.min_s / TFLOP, n=n)


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


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def save_calibration(device_name: str, copy_gbps: float | None = None, *,
                     gemm: Mapping[str, GemmRate] | None = None) -> Path:
    """Record measurements for `device_name` in its entry, keeping what it held otherwise
    and the other devices' entries: a copy bandwidth (`copy_gbps`, with the flush it was
    timed after) and GEMM rates (`gemm`, dtype name -> GemmRate, each replacing that
    dtype's). The file is replaced atomically, so a reader never sees half of it.

    An entry: {"copy_gbps", "l2_flush", "measured_at", "torch", "gemm": {dtype: {"tflops",
    "n", "tf32", "measured_at", "torch"}}}; entries written before the GEMM rates have no
    "gemm" key (load_ceilings reads them, `missing` names what they lack)."""
    path = calibration_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    data = _read_calibration(path)
    entry = data.get(device_name)
    entry = dict(entry) if isinstance(entry, dict) else {}
    if copy_gbps is not None:
        entry.update(copy_gbps=float(copy_gbps), l2_flush=CALIBRATION_FLUSH,
                     measured_at=_now(), torch=torch.__version__)
    if gemm:
        rates = entry.get("gemm")
        rates = dict(rates) if isinstance(rates, dict) else {}
        for dtype, rate in gemm.items():
            rates[dtype] = {"tflops": float(rate.tflops), "n": int(rate.n),
                            "tf32": False, "measured_at": _now(), "torch": torch.__version__}
        entry["gemm"] = rates
    data[device_name] = entry
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


def _rate(value) -> float | None:
    """A stored rate: a positive finite number, else None (a damaged entry is missing)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) \
            and math.isfinite(value) and value > 0:
        return float(value)
    return None


def _gemm_rates(entry: dict) -> tuple:
    """({dtype: TFLOP/s}, source) of an entry's "gemm" records; ({}, "none") without."""
    records = entry.get("gemm")
    rates, dates = {}, []
    for dtype, record in (records.items() if isinstance(records, dict) else ()):
        rate = _rate(record.get("tflops")) if isinstance(record, dict) else None
        if rate is not None:
            rates[str(dtype)] = rate
            dates.append(str(record.get("measured_at", ""))[:10] or "unknown date")
    return rates, (f"measured {max(dates)}" if dates else "none")


def load_ceilings(device: torch.device | str, *, datasheet_copy: bool = False) -> Ceilings:
    """The ceilings for `device`: copy bandwidth and GEMM rates from the calibration cache,
    the fp32 fallback peak from the datasheet. With `datasheet_copy`, an uncalibrated GPU
    falls back to the datasheet bandwidth (copy_source "datasheet"), which real copies do
    not reach."""
    device = torch.device(device)
    name = device_name(device)
    sheet = datasheet(name) if device.type == "cuda" else None
    peak = sheet.fp32_tflops if sheet else None
    entry = _read_calibration(calibration_path()).get(name)
    entry = entry if isinstance(entry, dict) else {}
    gemm, gemm_source = _gemm_rates(entry)
    copy, copy_source = None, "none"
    if entry.get("l2_flush") == CALIBRATION_FLUSH and _rate(entry.get("copy_gbps")):
        copy = _rate(entry.get("copy_gbps"))
        copy_source = f"measured {str(entry.get('measured_at', ''))[:10] or 'unknown date'}"
    elif datasheet_copy and sheet:
        copy, copy_source = float(sheet.copy_gbps), "datasheet"
    return Ceilings(name, copy, copy_source, peak, gemm_tflops=gemm, gemm_source=gemm_source)


def missing(ceilings: Ceilings, device: torch.device | str) -> tuple:
    """What a run on `device` lacks of its calibration, in words: "copy bandwidth" where no
    copy measured after the calibration's flush is stored, and on CUDA "<dtype> GEMM" for
    each of GEMM_DTYPES without a measured rate (a file of before the GEMM rates lacks
    them all). Empty: nothing to measure."""
    out = [] if ceilings.copy_gbps is not None and ceilings.copy_source != "datasheet" \
        else ["copy bandwidth"]
    if torch.device(device).type == "cuda":
        out += [f"{dt} GEMM" for dt in GEMM_DTYPES if not ceilings.gemm_tflops.get(dt)]
    return tuple(out)


def calibrate(device: torch.device | str, size_bytes: int | None = None, *,
              gemm_size: int = GEMM_SIZE, only_missing: bool = False) -> Ceilings:
    """Measure the copy bandwidth of `device` (copies of `size_bytes`, default
    measure_copy_bandwidth's) and, on CUDA, its dense GEMM rate per GEMM_DTYPES (square
    matmuls of `gemm_size`), save them, and return the ceilings. With `only_missing`, only
    what the stored calibration lacks is measured (`missing`)."""
    device = torch.device(device)
    lacking = missing(load_ceilings(device), device) if only_missing else None
    copy = None
    if lacking is None or "copy bandwidth" in lacking:
        copy = measure_copy_bandwidth(device, size_bytes)
    gemm = {}
    if device.type == "cuda":
        for dtype in GEMM_DTYPES:
            if lacking is None or f"{dtype} GEMM" in lacking:
                rate = measure_gemm_tflops(device, dtype, gemm_size)
                if rate is not None:
                    gemm[dtype] = rate
    if copy is not None or gemm:
        save_calibration(device_name(device), copy, gemm=gemm)
    return load_ceilings(device)


def no_ceilings(device) -> Ceilings:
    """Ceilings of a run that computes no roofline (correctness only, or no calibration)."""
    return Ceilings(device_name=str(device), copy_gbps=None, copy_source="none",
                    peak_tflops=None)
