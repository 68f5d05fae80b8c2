"""The roofline section: per op, a row per timed listed item (compulsory bytes, median
and IQR of the samples, the wall time of a call and its kernel launches, GB/s and TFLOP/s,
the fraction of the ceiling that bounds it: the measured copy bandwidth for a memory-bound
item, the measured compute peak of its dtype for a compute-bound one; speed as a fraction
of a device copy of the same bytes, arithmetic intensity, bound), the time-against-bytes
chart of the memory-bound items with the copy-bandwidth line and the curve of the
same-bytes copies, and the time-against-flops chart of the compute-bound items with their
compute-peak lines (each implementation's points joined by one line across the case
sizes), and a bar per implementation of its geometric-mean fraction of the roofline."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import pandas as pd

from bwd_suite.reports import chart, fmt, palette
from bwd_suite.reports.items import Items, case_label, compute_bound

NOISY_IQR = 0.10  # IQR / median above this marks a noisy timing (torch.utils.benchmark)
FIRST_ROWS = 40  # rows shown open, largest first; the rest fold (small correctness cases)


@dataclass(frozen=True)
class Row:
    anchor: str
    detail: str
    label: str
    case_id: str
    impl: str
    color: str
    verdict: str
    bytes: fmt.Num
    median: fmt.Num
    iqr: fmt.Num
    noisy: bool
    wall: fmt.Num  # milliseconds, host time of a call until the device finished it
    launches: fmt.Num
    temp: fmt.Num  # bytes the implementation allocated beyond its inputs and outputs
    n_samples: fmt.Num
    gbps: fmt.Num
    tflops: fmt.Num
    frac_copy_bw: fmt.Num  # missing on a compute-bound item: not its ceiling
    frac_peak_flops: fmt.Num  # of the compute peak, on a compute-bound item only
    frac_same_copy: fmt.Num
    arith_intensity: fmt.Num
    bound: str


@dataclass(frozen=True)
class Fraction:
    """An implementation's geometric-mean fraction of the roofline over one op's items:
    each item's fraction of the ceiling that bounds it (the copy bandwidth, or the compute
    peak of a compute-bound item)."""

    impl: str
    color: str
    geomean: fmt.Num
    n: int  # items in the mean
    n_compute: int  # of those, compute bound


@dataclass(frozen=True)
class OpRoofline:
    op: str
    rows: tuple  # the largest FIRST_ROWS items
    more_rows: tuple  # the rest, folded
    chart: Optional[chart.Chart]  # the items not compute bound, against bytes
    n_timed: int  # every timed item of the op, listed or not
    n_listed: int
    copy_lines: tuple  # (label, fmt.Num GB/s)
    compute_chart: Optional[chart.Chart] = None  # the compute-bound items, against flops
    peak_lines: tuple = ()  # (label, fmt.Num TFLOP/s) of the compute peaks used
    fractions: tuple = ()  # Fraction per implementation, the closest to its roofline first
    bars: Optional[chart.Bars] = None  # the fractions drawn


COLUMNS = ["case_id", "case_group", "impl", "anchor", "verdict", "time_samples_s",
           "time_median_s", "time_iqr_s", "bytes", "flops", "gbps", "tflops", "frac_copy_bw",
           "frac_peak_flops", "frac_same_copy", "same_copy_s", "arith_intensity", "bound",
           "wall_median_ms", "launches", "peak_mem_bytes"]



def _n(samples) -> Optional[int]:
    return None if samples is None or isinstance(samples, float) else len(samples)


def _copy_lines(rows: pd.DataFrame) -> list:
    out = []
    for (dev, bw), _ in rows.groupby(["device_name", "copy_gbps"], sort=False):
        out.append((f"{dev} copy {bw:,.0f} GB/s", float(bw)))
    return out


def _peak_lines(rows: pd.DataFrame) -> list:
    """(label, TFLOP/s) of each compute peak the rows were judged against."""
    out = []
    for (dev, peak), _ in rows.groupby(["device_name", "peak_tflops"], sort=False):
        out.append((f"{dev} peak {peak:,.0f} TFLOP/s", float(peak)))
    return out


def _row(r, op: str, color: dict) -> Row:
    med, iqr = fmt.value(r.time_median_s), fmt.value(r.time_iqr_s)
    compute = compute_bound(r.bound)
    return Row(
        anchor=f"r{r.anchor}", detail=r.anchor,
        label=f"{r.case_group}/{case_label(op, r.case_group, r.case_id)}",
        case_id=r.case_id, impl=r.impl, color=color[r.impl], verdict=r.verdict,
        bytes=fmt.nbytes(r.bytes), median=fmt.seconds(med), iqr=fmt.seconds(iqr),
        noisy=bool(med and iqr is not None and iqr / med > NOISY_IQR),
        wall=fmt.millis(r.wall_median_ms), launches=fmt.count(r.launches),
        temp=fmt.nbytes(r.peak_mem_bytes), n_samples=fmt.count(_n(r.time_samples_s)),
        gbps=fmt.rate(r.gbps), tflops=fmt.rate(r.tflops),
        # a compute-bound item's share of the copy bandwidth says nothing about it
        frac_copy_bw=fmt.percent(None if compute else r.frac_copy_bw),
        frac_peak_flops=fmt.percent(r.frac_peak_flops if compute else None),
        frac_same_copy=fmt.percent(r.frac_same_copy),
        arith_intensity=fmt.sig(r.arith_intensity),
        bound="" if pd.isna(r.bound) else str(r.bound))


def _datum(r, compute: bool) -> chart.Datum:
    med = fmt.value(r.time_median_s)
    if compute:
        rate = f"{fmt.value(r.tflops) or 0:.1f} TFLOP/s"
        if fmt.value(r.frac_peak_flops) is not None:
            rate += f", {fmt.percent(r.frac_peak_flops).text} of peak"
        x, size = float(r.flops), fmt.flops_text(r.flops)
    else:
        rate = f"{fmt.value(r.gbps) or 0:.1f} GB/s"
        x, size = float(r.bytes), fmt.bytes_text(r.bytes)
    return chart.Datum(x=x, seconds=med, series=r.impl, href=f"#r{r.anchor}",
                       title=f"{r.case_id} [{r.impl}]: {fmt.time_text(med)}, {size}, {rate}")


def _fractions(timed: pd.DataFrame, impls: list, color: dict) -> list:
    """Fraction per implementation of `timed` (every timed item of one op): over its items
    that passed or failed as declared (a known failure's time is valid; an undeclared
    failure's time is that of wrong code, which may skip work), largest first."""
    valid = timed[~timed["unexpected"]]
    compute = valid["bound"].map(compute_bound).astype(bool)
    frac = valid["frac_peak_flops"].where(compute, valid["frac_copy_bw"])
    out = []
    for impl in impls:
        mine = (valid["impl"] == impl).to_numpy()
        values = [float(f) for f in frac[mine] if fmt.value(f) is not None and f > 0]
        if not values:
            continue
        geo = math.exp(sum(map(math.log, values)) / len(values))
        n_compute = int(sum(c for c, f in zip(compute[mine], frac[mine])
                            if fmt.value(f) is not None and f > 0))
        out.append(Fraction(impl, color[impl], fmt.percent(geo), len(values), n_compute))
    return sorted(out, key=lambda f: -float(f.geomean.raw))


def _bars(fractions: list, color: dict, op: str) -> Optional[chart.Bars]:
    data = [chart.BarDatum(
        f.impl, float(f.geomean.raw), f.geomean.text,
        f"{f.impl}: {f.geomean.text} of the roofline, geometric mean over {f.n} items"
        + (f" ({f.n_compute} of them against the compute peak)" if f.n_compute else ""))
        for f in fractions]
    return chart.bars(data, color, "geometric-mean fraction of the roofline (linear scale)",
                      f"{op}: each implementation's geometric-mean fraction of the roofline")


def build(items: Items, colors: Optional[dict] = None) -> tuple:
    """`colors`: the page's implementation colours (reports.palette)."""
    colors = palette.colors(items.rows["impl"]) if colors is None else colors
    out = []
    for op in items.ops():
        impls = items.impls(op)
        color = {i: palette.color(colors, i) for i in impls}
        all_timed = items.rows[(items.rows["op"] == op) & items.rows["timed"]]
        if all_timed.empty:
            continue
        timed = all_timed[all_timed["shown"]]
        order = {i: k for k, i in enumerate(impls)}
        timed = timed.assign(_impl=timed["impl"].map(order)).sort_values(
            ["bytes", "case_id", "_impl"], ascending=[False, True, True], kind="stable")
        rows = [_row(r, op, color) for r in timed[COLUMNS].itertuples(index=False)]
        is_compute = timed["bound"].map(compute_bound).astype(bool)
        memory, compute = timed[~is_compute], timed[is_compute & timed["flops"].notna()]
        data = [_datum(r, False) for r in memory[COLUMNS].itertuples(index=False)]
        lines = _copy_lines(memory[memory["copy_gbps"].notna()])
        copied = memory[memory["same_copy_s"].notna()]
        copies = list(zip(copied["bytes"], copied["same_copy_s"]))
        peaks = _peak_lines(compute[compute["peak_tflops"].notna()])
        compute_data = [_datum(r, True) for r in compute[COLUMNS].itertuples(index=False)]
        # never split a case's implementations between the open and the folded table
        cut = len(rows) if len(rows) <= FIRST_ROWS else next(
            (k for k in range(FIRST_ROWS, len(rows)) if rows[k].case_id != rows[k - 1].case_id),
            len(rows))
        fractions = _fractions(all_timed, impls, color)
        out.append(OpRoofline(
            op=op, rows=tuple(rows[:cut]), more_rows=tuple(rows[cut:]),
            chart=chart.loglog(data, lines, impls, copies, color),
            n_timed=len(all_timed), n_listed=len(rows),
            copy_lines=tuple((lbl, fmt.fixed(bw)) for lbl, bw in lines),
            compute_chart=chart.loglog(compute_data, peaks, impls, (), color, axis=chart.FLOPS),
            peak_lines=tuple((lbl, fmt.fixed(p)) for lbl, p in peaks),
            fractions=tuple(fractions), bars=_bars(fractions, color, op)))
    return tuple(out)
