"""The roofline section: per op, a row per timed listed item (compulsory bytes, median
and IQR of the samples, the wall time of a call and its kernel launches, GB/s, fraction
of the measured copy bandwidth, speed as a fraction of a device copy of the same bytes,
arithmetic intensity, bound) and the time-against-bytes chart with the copy-bandwidth
line and the curve of the same-bytes copies."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import pandas as pd

from bwd_suite.reports import chart, fmt, palette
from bwd_suite.reports.items import Items, case_label

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
    frac_copy_bw: fmt.Num
    frac_same_copy: fmt.Num
    arith_intensity: fmt.Num
    bound: str


@dataclass(frozen=True)
class OpRoofline:
    op: str
    rows: tuple  # the largest FIRST_ROWS items
    more_rows: tuple  # the rest, folded
    chart: Optional[chart.Chart]
    n_timed: int  # every timed item of the op, listed or not
    n_listed: int
    copy_lines: tuple  # (label, fmt.Num GB/s)


COLUMNS = ["case_id", "case_group", "impl", "anchor", "verdict", "time_samples_s",
           "time_median_s", "time_iqr_s", "bytes", "gbps", "frac_copy_bw", "frac_same_copy",
           "same_copy_s", "arith_intensity", "bound", "wall_median_ms", "launches",
           "peak_mem_bytes"]


def _n(samples) -> Optional[int]:
    return None if samples is None or isinstance(samples, float) else len(samples)


def _copy_lines(rows: pd.DataFrame) -> list:
    out = []
    for (dev, bw), _ in rows.groupby(["device_name", "copy_gbps"], sort=False):
        out.append((f"{dev} copy {bw:,.0f} GB/s", float(bw)))
    return out


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
        rows, data = [], []
        for r in timed[COLUMNS].itertuples(index=False):
            med, iqr = fmt.value(r.time_median_s), fmt.value(r.time_iqr_s)
            label = case_label(op, r.case_group, r.case_id)
            rows.append(Row(
                anchor=f"r{r.anchor}", detail=r.anchor, label=f"{r.case_group}/{label}",
                case_id=r.case_id, impl=r.impl, color=color[r.impl], verdict=r.verdict,
                bytes=fmt.nbytes(r.bytes), median=fmt.seconds(med), iqr=fmt.seconds(iqr),
                noisy=bool(med and iqr is not None and iqr / med > NOISY_IQR),
                wall=fmt.millis(r.wall_median_ms), launches=fmt.count(r.launches),
                temp=fmt.nbytes(r.peak_mem_bytes), n_samples=fmt.count(_n(r.time_samples_s)), gbps=fmt.rate(r.gbps),
                frac_copy_bw=fmt.percent(r.frac_copy_bw),
                frac_same_copy=fmt.percent(r.frac_same_copy),
                arith_intensity=fmt.sig(r.arith_intensity),
                bound="" if pd.isna(r.bound) else str(r.bound)))
            gbps = fmt.value(r.gbps)
            data.append(chart.Datum(
                bytes=float(r.bytes), seconds=med, series=r.impl, href=f"#r{r.anchor}",
                title=f"{r.case_id} [{r.impl}]: {fmt.time_text(med)}, "
                      f"{fmt.bytes_text(r.bytes)}, {gbps or 0:.1f} GB/s"))
        lines = _copy_lines(timed[timed["copy_gbps"].notna()])
        copied = timed[timed["same_copy_s"].notna()]
        copies = list(zip(copied["bytes"], copied["same_copy_s"]))
        # never split a case's implementations between the open and the folded table
        cut = len(rows) if len(rows) <= FIRST_ROWS else next(
            (k for k in range(FIRST_ROWS, len(rows)) if rows[k].case_id != rows[k - 1].case_id),
            len(rows))
        out.append(OpRoofline(op=op, rows=tuple(rows[:cut]), more_rows=tuple(rows[cut:]),
                              chart=chart.loglog(data, lines, impls, copies, color),
                              n_timed=len(all_timed), n_listed=len(rows),
                              copy_lines=tuple((lbl, fmt.fixed(bw)) for lbl, bw in lines)))
    return tuple(out)
