"""Charts as plain geometry for inline SVG; the template only draws them.

`loglog`: time against bytes (or, for compute-bound items, against flops), one colour
per implementation, its points joined by one line across the case sizes (through its
median time at each size) and labelled with its name at the line's end; a line per
measured ceiling (time = bytes / copy bandwidth, or flops / compute peak) and the curve of
device copies of the items' own bytes, timed as the items were.

`bars`: one horizontal bar per implementation, e.g. its geometric-mean fraction of the
roofline, on a linear axis from 0 to 100 % (further when a value passes it).

`stacked`: one horizontal bar per row made of segments (a training step's stages), on a
linear axis from 0 to the longest row's total, with a legend of the segments."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from bwd_suite.reports import fmt, palette

WIDTH, HEIGHT = 860, 440
LEFT, RIGHT, TOP, BOTTOM = 70, 130, 20, 50  # margins for tick labels, and line-end names
LABEL_CHARS = 18  # a line-end name longer than this is cut (the full one in its <title>)
CHAR_W, LINE_H = 6.2, 12  # about one character's width and a line's height at 11 px
PALETTE = palette.PALETTE
MAX_DECADES_BELOW = 2  # how far the y axis may extend below the points to show a line


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    color: str
    title: str
    href: str


@dataclass(frozen=True)
class Segment:
    x1: float
    y1: float
    x2: float
    y2: float
    label: str
    lx: float  # label position: the segment's middle, just below the line
    ly: float
    angle: float  # degrees: the label runs along the line


@dataclass(frozen=True)
class Line:
    """One implementation's line across the case sizes, labelled at its end."""

    series: str
    color: str
    points: str  # SVG polyline points, in order of x
    label: str  # the name, cut to LABEL_CHARS
    lx: float  # the label's start: right of the line's last point
    ly: float
    leader: str = ""  # polyline points from the last point to a label moved off it


@dataclass(frozen=True)
class Tick:
    x1: float  # the grid line
    y1: float
    x2: float
    y2: float
    tx: float  # the label
    ty: float
    label: str


@dataclass(frozen=True)
class Legend:
    label: str
    color: str
    x: float  # the swatch's centre
    y: float
    tx: float  # the label's start
    ty: float


@dataclass(frozen=True)
class Axis:
    """What the x axis counts: its label, its tick text, and the x units a second in one
    unit of a ceiling line's rate (GB/s: 1e9 bytes a second)."""

    what: str
    tick: Callable[[float], str]
    per_rate: float


BYTES = Axis("compulsory bytes", fmt.bytes_text, 1e9)  # lines in GB/s
FLOPS = Axis("floating-point operations", fmt.flops_text, 1e12)  # lines in TFLOP/s


@dataclass(frozen=True)
class Chart:
    width: int
    height: int
    left: float
    top: float
    plot_w: float
    plot_h: float
    xticks: tuple
    yticks: tuple
    points: tuple
    lines: tuple
    legend: tuple
    copy_curve: str  # SVG polyline points of the same-bytes copies ("" when none)
    copy_legend: Optional[Legend]
    x_label: str
    y_label: str
    x_label_at: tuple  # (x, y)
    y_label_at: tuple  # (x, y) before the -90 degree rotation
    aria: str = ""  # what the chart shows, in words
    impl_lines: tuple = ()  # Line per implementation, in legend order


@dataclass(frozen=True)
class Datum:
    x: float  # bytes, or flops on the FLOPS axis
    seconds: float
    series: str
    title: str
    href: str


def _decades(lo: float, hi: float) -> tuple:
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    return (a, b) if b > a else (a, a + 1)


def _xticks(lo: int, hi: int, sx: Callable, top: float, bottom: float,
            text: Callable[[float], str] = fmt.bytes_text) -> tuple:
    return tuple(Tick(x, top, x, bottom, x, bottom + 16, text(10.0 ** e))
                 for e in range(lo, hi + 1) for x in [round(sx(e), 1)])


def _yticks(lo: int, hi: int, sy: Callable, left: float, right: float) -> tuple:
    return tuple(Tick(left, y, right, y, left - 6, y + 4, fmt.time_text(10.0 ** e))
                 for e in range(lo, hi + 1) for y in [round(sy(e), 1)])


def _clip(x_at, y_at, xlo, xhi, ylo, yhi):
    """The part of the line log t = log b - log bw inside the box (log coordinates)."""
    # slope 1 in log-log: y = x + c
    c = y_at - x_at
    x1, x2 = max(xlo, ylo - c), min(xhi, yhi - c)
    return (x1, x1 + c, x2, x2 + c) if x2 > x1 else None


COPY_CURVE_LABEL = "copy of the same bytes"


def _cut(name: str, chars: int = LABEL_CHARS) -> str:
    return name if len(name) <= chars else name[:chars - 1] + "…"


def _median(values: list) -> float:
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def _impl_lines(data: Sequence[Datum], series: list, color: dict, sx, sy,
                bottom: float) -> tuple:
    """A line per series through its median log time at each size (sizes within a pixel
    are one: cases of one size but another layout or sweep would make it zigzag), its name
    right of the last point; names are moved down (or up, at the bottom) until none
    overlaps another."""
    lines = []
    for s in series:
        at: dict = {}
        for d in data:
            if d.series == s:
                px = sx(math.log10(d.x))
                at.setdefault(round(px), []).append((px, math.log10(d.seconds)))
        xy = [(round(sum(p for p, _ in v) / len(v), 1), round(sy(_median([y for _, y in v])), 1))
              for _, v in sorted(at.items())]
        lines.append((s, xy))
    placed: list = []  # (x, y, width) of the labels so far
    out = []
    for s, xy in sorted(lines, key=lambda sl: (sl[1][-1][1], sl[0])):
        label = _cut(s)
        x, y = xy[-1][0] + 7, xy[-1][1] + 4
        width = CHAR_W * len(label)

        def clash(y_):
            return any(abs(y_ - py) < LINE_H and x < px + pw and px < x + width
                       for px, py, pw in placed)
        step = LINE_H if y + LINE_H <= bottom else -LINE_H
        for _ in range(len(placed) + 1):
            if not clash(y):
                break
            y += step
        placed.append((x, y, width))
        end = xy[-1]
        # a name moved off its line's end gets a thin line back to it
        leader = f"{end[0] + 2},{end[1]} {round(x - 2, 1)},{round(y - 4, 1)}" \
            if abs(y - (end[1] + 4)) > 1 else ""
        out.append(Line(s, color[s], " ".join(f"{a},{b}" for a, b in xy), label,
                        round(x, 1), round(y, 1), leader))
    order = {s: k for k, s in enumerate(series)}
    return tuple(sorted(out, key=lambda ln: order[ln.series]))


def loglog(data: Sequence[Datum], rates: Sequence[tuple],
           series: Sequence[str] = (), copies: Sequence[tuple] = (),
           colors: Optional[dict] = None, axis: Axis = BYTES) -> Optional[Chart]:
    """`rates`: (label, rate) of each ceiling line, in GB/s on the BYTES axis (the copy
    bandwidths), in TFLOP/s on the FLOPS axis (the compute peaks); `series`: legend order,
    the data's order where not given; `copies`: (bytes, seconds) of device copies of the
    items' own bytes, drawn as one curve in order of bytes; `colors`: {series: colour}, the
    page's implementation colours (reports.palette), by default those of these series."""
    data = [d for d in data if d.x > 0 and d.seconds > 0]
    if not data:
        return None
    copies = sorted({(float(b), float(s)) for b, s in copies if b > 0 and s > 0})
    xlo, xhi = _decades(min(d.x for d in data), max(d.x for d in data))
    ylo, yhi = _decades(min([d.seconds for d in data] + [s for _, s in copies]),
                        max(d.seconds for d in data))
    lines_at = [(label, r) for label, r in rates if r and r > 0]
    for _, r in lines_at:  # let the line show where the points sit far above it
        y_line = math.log10(10.0 ** xhi / (r * axis.per_rate))
        if y_line < ylo:
            ylo = max(math.floor(y_line), ylo - MAX_DECADES_BELOW)
    pw, ph = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def sx(lx):
        return LEFT + (lx - xlo) / (xhi - xlo) * pw

    def sy(ly):
        return TOP + ph - (ly - ylo) / (yhi - ylo) * ph

    series = list(dict.fromkeys([*series, *(d.series for d in data)]))
    present = {d.series for d in data}
    series = [s for s in series if s in present]
    given = colors if colors is not None else palette.colors(series)
    color = {s: palette.color(given, s) for s in series}
    points = tuple(Point(round(sx(math.log10(d.x)), 1), round(sy(math.log10(d.seconds)), 1),
                         color[d.series], d.title, d.href) for d in data)
    lines = []
    for label, r in lines_at:
        seg = _clip(0.0, math.log10(1 / (r * axis.per_rate)), xlo, xhi, ylo, yhi)
        if seg:
            x1, y1, x2, y2 = (round(v, 1) for v in (sx(seg[0]), sy(seg[1]), sx(seg[2]),
                                                     sy(seg[3])))
            angle = math.degrees(math.atan2(y2 - y1, x2 - x1))
            # below the line: nothing runs faster than the ceiling, so the points sit above it
            nx, ny = -math.sin(math.radians(angle)), math.cos(math.radians(angle))
            lines.append(Segment(x1, y1, x2, y2, label, round((x1 + x2) / 2 + 12 * nx, 1),
                                 round((y1 + y2) / 2 + 12 * ny, 1), round(angle, 1)))
    legend = tuple(Legend(s, color[s], LEFT + 14, TOP + 14 + 16 * k, LEFT + 24, TOP + 18 + 16 * k)
                   for k, s in enumerate(series))
    curve = " ".join(f"{round(sx(math.log10(b)), 1)},{round(sy(math.log10(s)), 1)}"
                     for b, s in copies)
    k = len(series)
    copy_legend = (Legend(COPY_CURVE_LABEL, "", LEFT + 14, TOP + 14 + 16 * k, LEFT + 24,
                          TOP + 18 + 16 * k) if copies else None)
    ceiling = "copy-bandwidth" if axis is BYTES else "compute-peak"
    return Chart(width=WIDTH, height=HEIGHT, left=LEFT, top=TOP, plot_w=pw, plot_h=ph,
                 xticks=_xticks(xlo, xhi, sx, TOP, TOP + ph, axis.tick),
                 yticks=_yticks(ylo, yhi, sy, LEFT, LEFT + pw),
                 points=points, lines=tuple(lines), legend=legend, copy_curve=curve,
                 copy_legend=copy_legend,
                 x_label=f"{axis.what} (log scale)",
                 y_label="median backward time (log scale)",
                 x_label_at=(LEFT + pw / 2, HEIGHT - 12), y_label_at=(-(TOP + ph / 2), 16),
                 aria=f"median time against {axis.what}, log-log, a line per "
                      f"implementation, with the {ceiling} line"
                      + (" and the same-bytes copies" if copies else ""),
                 impl_lines=_impl_lines(data, series, color, sx, sy, TOP + ph))


# -- bars ------------------------------------------------------------------------------------

BAR_LEFT, BAR_RIGHT, BAR_ROW, BAR_H, BAR_TOP, BAR_BOTTOM = 170, 130, 22, 14, 8, 34


@dataclass(frozen=True)
class BarDatum:
    series: str
    value: float  # a fraction: 1.0 is the whole axis's 100 %
    text: str  # the value as shown at the bar's end
    title: str  # the hover text


@dataclass(frozen=True)
class Bar:
    series: str
    label: str  # the name, cut to fit the left gutter
    color: str
    x: float
    y: float
    w: float
    h: float
    text: str
    tx: float  # the value's text: right of the bar
    ty: float
    ly: float  # the name's baseline, right-aligned at BAR_LEFT - 6
    title: str


@dataclass(frozen=True)
class Bars:
    width: int
    height: int
    left: float
    top: float
    plot_w: float
    plot_h: float
    bars: tuple
    xticks: tuple
    x_label: str
    x_label_at: tuple
    aria: str


def bars(data: Sequence[BarDatum], colors: dict, x_label: str, aria: str) -> Optional[Bars]:
    """Horizontal bars in the order given, on a linear axis from 0 to 100 % or, when a
    value passes 100 %, to the next tick above it; None without positive values."""
    data = [d for d in data if d.value is not None and d.value > 0 and math.isfinite(d.value)]
    if not data:
        return None
    top = max(1.0, max(d.value for d in data))
    step = 0.25 if top <= 1.5 else 0.5 if top <= 3 else 10 ** math.floor(math.log10(top))
    top = math.ceil(top / step - 1e-9) * step
    pw = WIDTH - BAR_LEFT - BAR_RIGHT
    ph = BAR_ROW * len(data)
    height = BAR_TOP + ph + BAR_BOTTOM

    def sx(v):
        return round(BAR_LEFT + v / top * pw, 1)

    out = []
    for k, d in enumerate(data):
        y = BAR_TOP + k * BAR_ROW + (BAR_ROW - BAR_H) / 2
        out.append(Bar(d.series, _cut(d.series, int((BAR_LEFT - 12) / CHAR_W)),
                       palette.color(colors, d.series), BAR_LEFT, y,
                       round(sx(d.value) - BAR_LEFT, 1), BAR_H, d.text, sx(d.value) + 5,
                       y + BAR_H - 3, y + BAR_H - 3, d.title))
    n_ticks = int(round(top / step))
    ticks = tuple(Tick(sx(k * step), BAR_TOP, sx(k * step), BAR_TOP + ph, sx(k * step),
                       BAR_TOP + ph + 14, f"{100 * k * step:g} %") for k in range(n_ticks + 1))
    return Bars(width=WIDTH, height=height, left=BAR_LEFT, top=BAR_TOP, plot_w=pw, plot_h=ph,
                bars=tuple(out), xticks=ticks, x_label=x_label,
                x_label_at=(BAR_LEFT + pw / 2, height - 4), aria=aria)


# -- stacked bars ----------------------------------------------------------------------------

@dataclass(frozen=True)
class StackPart:
    """One part of a stacked row: its name (the legend's), value and hover text."""

    name: str
    value: float
    title: str


@dataclass(frozen=True)
class StackRow:
    label: str
    segments: tuple  # StackPart per part, in the legend's order
    text: str  # the total as shown at the bar's end


@dataclass(frozen=True)
class Piece:
    name: str
    color: str
    x: float
    w: float
    title: str


@dataclass(frozen=True)
class StackBar:
    label: str
    y: float
    h: float
    ly: float
    pieces: tuple
    text: str
    tx: float


@dataclass(frozen=True)
class Stacked:
    width: int
    height: int
    left: float
    top: float
    plot_w: float
    plot_h: float
    rows: tuple
    xticks: tuple
    legend: tuple
    x_label: str
    x_label_at: tuple
    aria: str


def _nice_step(top: float) -> float:
    """A tick step of 1, 2 or 5 times a power of ten giving 3 to 8 ticks up to top."""
    base = 10 ** math.floor(math.log10(top))
    return next(m * base for m in (0.2, 0.5, 1.0, 2.0) if top / (m * base) <= 8)


def stacked(rows: Sequence[StackRow], colors: dict, x_label: str, tick: Callable[[float], str],
            aria: str) -> Optional[Stacked]:
    """Rows of segments stacked left to right in the order given, `colors` a colour per
    segment name; None when no row has a positive total."""
    rows = [r for r in rows if sum(s.value for s in r.segments if s.value and s.value > 0) > 0]
    if not rows:
        return None
    top = max(sum(s.value for s in r.segments if s.value and s.value > 0) for r in rows)
    step = _nice_step(top)
    top = math.ceil(top / step - 1e-9) * step
    pw = WIDTH - BAR_LEFT - BAR_RIGHT
    legend_h = 18
    ph = BAR_ROW * len(rows)
    height = BAR_TOP + legend_h + ph + BAR_BOTTOM
    y0 = BAR_TOP + legend_h

    def sx(v):
        return round(BAR_LEFT + v / top * pw, 1)

    out = []
    for k, r in enumerate(rows):
        y = y0 + k * BAR_ROW + (BAR_ROW - BAR_H) / 2
        x, pieces = 0.0, []
        for sg in r.segments:
            if not sg.value or sg.value <= 0:
                continue
            pieces.append(Piece(sg.name, colors.get(sg.name, "#7f7f7f"), sx(x),
                                round(sx(x + sg.value) - sx(x), 1), sg.title))
            x += sg.value
        out.append(StackBar(_cut(r.label, int((BAR_LEFT - 12) / CHAR_W)), y, BAR_H,
                            y + BAR_H - 3, tuple(pieces), r.text, sx(x) + 5))
    names = list(dict.fromkeys(sg.name for r in rows for sg in r.segments))
    legend, lx = [], BAR_LEFT
    for n in names:
        legend.append(Legend(n, colors.get(n, "#7f7f7f"), lx + 4, BAR_TOP + 6, lx + 12,
                             BAR_TOP + 10))
        lx += 24 + CHAR_W * len(n)
    n_ticks = int(round(top / step))
    ticks = tuple(Tick(sx(k * step), y0, sx(k * step), y0 + ph, sx(k * step), y0 + ph + 14,
                       tick(k * step)) for k in range(n_ticks + 1))
    return Stacked(width=WIDTH, height=height, left=BAR_LEFT, top=y0, plot_w=pw, plot_h=ph,
                   rows=tuple(out), xticks=ticks, legend=tuple(legend), x_label=x_label,
                   x_label_at=(BAR_LEFT + pw / 2, height - 4), aria=aria)
