"""The report's charts (issue 40, deliverable 4): per op a line per implementation across
the case sizes, a bar per implementation of its geometric-mean fraction of the roofline,
and one colour per implementation name: distinct within a page, the same on pages with
other sets of implementations, and far enough apart to tell (CIEDE2000) and to see on
white (WCAG contrast)."""

import itertools
import math
import re
import zlib

import pandas as pd
import pytest

from bwd_suite.reports import chart, palette, render
from tests.reports.test_report import Tree, perf  # noqa: F401  (fixture)

VERDICT_COLOURS = ("#b3261e", "#7b1fa2", "#b35c00", "#9aa3ab", "#b08900")  # history's dots


# -- colour science, enough to hold the palette to its docstring -----------------------------

def _linear(c: int) -> float:
    c /= 255
    return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4


def _rgb(h: str) -> tuple:
    return tuple(_linear(int(h[i:i + 2], 16)) for i in (1, 3, 5))


def contrast_on_white(h: str) -> float:
    r, g, b = _rgb(h)
    return 1.05 / (0.2126 * r + 0.7152 * g + 0.0722 * b + 0.05)


def lab(h: str) -> tuple:
    r, g, b = _rgb(h)
    xyz = ((0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047,
           0.2126 * r + 0.7152 * g + 0.0722 * b,
           (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883)
    fx, fy, fz = (t ** (1 / 3) if t > 216 / 24389 else (24389 / 27 * t + 16) / 116 for t in xyz)
    return 116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)


def ciede2000(h1: str, h2: str) -> float:
    return delta_e_2000(lab(h1), lab(h2))


def delta_e_2000(lab1: tuple, lab2: tuple) -> float:
    """CIEDE2000 (Sharma, Wu, Dalal 2005) of two CIELAB colours."""
    (l1, a1, b1), (l2, a2, b2) = lab1, lab2
    cb = (math.hypot(a1, b1) + math.hypot(a2, b2)) / 2
    g = 0.5 * (1 - math.sqrt(cb ** 7 / (cb ** 7 + 25 ** 7)))
    a1, a2 = (1 + g) * a1, (1 + g) * a2
    c1, c2 = math.hypot(a1, b1), math.hypot(a2, b2)
    h1_, h2_ = (math.degrees(math.atan2(b, a)) % 360 for a, b in ((a1, b1), (a2, b2)))
    dh = 0.0 if c1 * c2 == 0 else (h2_ - h1_ + 180) % 360 - 180
    dl, dc, dhh = l2 - l1, c2 - c1, 2 * math.sqrt(c1 * c2) * math.sin(math.radians(dh / 2))
    lm, cm = (l1 + l2) / 2, (c1 + c2) / 2
    hm = h1_ + h2_ if c1 * c2 == 0 else (
        (h1_ + h2_) / 2 if abs(h1_ - h2_) <= 180 else (h1_ + h2_ + 360 * (h1_ + h2_ < 360)
                                                         - 360 * (h1_ + h2_ >= 360)) / 2)
    t = (1 - 0.17 * math.cos(math.radians(hm - 30)) + 0.24 * math.cos(math.radians(2 * hm))
         + 0.32 * math.cos(math.radians(3 * hm + 6)) - 0.20 * math.cos(math.radians(4 * hm - 63)))
    sl = 1 + 0.015 * (lm - 50) ** 2 / math.sqrt(20 + (lm - 50) ** 2)
    sc, sh = 1 + 0.045 * cm, 1 + 0.015 * cm * t
    rt = (-math.sin(math.radians(60 * math.exp(-((hm - 275) / 25) ** 2)))
          * 2 * math.sqrt(cm ** 7 / (cm ** 7 + 25 ** 7)))
    return math.sqrt((dl / sl) ** 2 + (dc / sc) ** 2 + (dhh / sh) ** 2
                     + rt * (dc / sc) * (dhh / sh))


@pytest.mark.parametrize("lab1, lab2, want", [  # Sharma, Wu, Dalal (2005): pairs 1, 7, 17, 25
    ((50, 2.6772, -79.7751), (50, 0, -82.7485), 2.0425),
    ((50, 0, 0), (50, -1, 2), 2.3669),
    ((50, 2.5, 0), (73, 25, -18), 27.1492),
    ((60.2574, -34.0099, 36.2677), (60.4626, -34.1751, 39.4387), 1.2644),
])
def test_ciede2000_matches_published_pairs(lab1, lab2, want):
    assert delta_e_2000(lab1, lab2) == pytest.approx(want, abs=1e-4)
    assert delta_e_2000(lab2, lab1) == pytest.approx(want, abs=1e-4)


# -- the palette -------------------------------------------------------------------------------

def test_palette_entries_are_far_apart_and_visible_on_white():
    assert len(set(palette.PALETTE)) == len(palette.PALETTE) == 32
    worst = min(ciede2000(a, b) for a, b in itertools.combinations(palette.PALETTE, 2))
    assert worst >= 11, worst
    assert all(contrast_on_white(c) >= 3.0 for c in palette.PALETTE)
    # a passing dot never reads as a verdict's colour
    assert min(ciede2000(c, v) for c in palette.PALETTE for v in VERDICT_COLOURS) >= 16


def test_the_suites_implementations_have_distinct_fixed_colours():
    assert len(set(palette.FIXED.values())) == len(palette.FIXED)
    assert all(0 <= k < len(palette.PALETTE) for k in palette.FIXED.values())
    # attention's thirteen implementations, one page's worst case: far apart in colour
    attention = ["flash_attn2", "flash_attn3", "torch_cudnn", "torch_cudnn_mask",
                 "torch_efficient", "torch_efficient_mask", "torch_flash", "torch_flex",
                 "torch_fp32", "torch_math", "torch_ref", "torch_sdpa", "torch_tiled"]
    c = palette.colors(attention)
    assert min(ciede2000(c[a], c[b]) for a, b in itertools.combinations(attention, 2)) >= 18


def colliding_names():
    """Two names outside FIXED whose CRC-32 picks the same slot, and a third that picks
    another slot that no FIXED name of these tests holds."""
    by_slot: dict = {}
    for k in itertools.count():
        name = f"port_{k}"
        s = zlib.crc32(name.encode()) % len(palette.PALETTE)
        if s in palette.FIXED.values():
            continue
        by_slot.setdefault(s, []).append(name)
        if len(by_slot[s]) == 2 and len(by_slot) > 1:
            other = next(v[0] for t, v in by_slot.items() if t != s)
            return by_slot[s][0], by_slot[s][1], other


def test_a_collision_moves_the_later_name_only_and_only_where_needed():
    first, second, other = colliding_names()
    assert palette.slot(first) == palette.slot(second) != palette.slot(other)
    both = palette.colors([second, first, "torch_ref"])
    assert both[first] == palette.PALETTE[palette.slot(first)]  # the first by name keeps it
    assert both[second] != both[first]  # the later takes the next free slot
    assert palette.colors([second])[second] == both[first]  # alone, nothing to resolve
    # names without a collision keep their colour whatever else is on the page
    assert palette.colors([other, first])[other] == palette.colors([other])[other] == \
        palette.colors([other, "torch_ref", "dao", second])[other]


def test_colours_are_distinct_within_a_page_until_the_palette_runs_out():
    names = [f"port_{k}" for k in range(60)]
    c = palette.colors(names[:len(palette.PALETTE)])
    assert len(set(c.values())) == len(palette.PALETTE)
    assert len(set(palette.colors(names).values())) == len(palette.PALETTE)  # then shared


# -- pages ---------------------------------------------------------------------------------

def with_impls(perf, impls: dict, op: str = "causal_conv1d") -> pd.DataFrame:  # noqa: F811
    """The perf run's torch_ref rows again as each {implementation: time scale} of `op`."""
    base = perf[perf.impl == "torch_ref"]
    out = []
    for impl, scale in impls.items():
        d = base.copy()
        d["op"], d["impl"], d["impl_kind"] = op, impl, "native"
        d["case_id"] = d["case_id"].str.replace("causal_conv1d/", f"{op}/")
        d["time_median_s"] = d["time_median_s"] * scale
        d["time_samples_s"] = [s * scale for s in d["time_samples_s"]]
        d["frac_copy_bw"] = d["frac_copy_bw"] / scale
        out.append(d)
    return pd.concat(out, ignore_index=True)


def page_colours(html: str) -> dict:
    """{implementation: {colours}} of every swatch, line, line label and bar of a page."""
    seen: dict = {}
    for n in Tree(html).root.iter():
        impl, colour = None, None
        if n.attrs.get("class") == "swatch":
            # a header's swatch: its name, and " (baseline)" where it is the yardstick
            impl = n.up("data-impl") or n.parent.all_text().strip().split(" (")[0]
            colour = n.attrs["data-color"]
        elif n.tag == "polyline" and n.attrs.get("class") == "impl":
            impl, colour = n.attrs["data-impl"], n.attrs["stroke"]
        elif n.tag == "rect" and n.parent.tag == "g" and "data-impl" in n.parent.attrs:
            impl, colour = n.parent.attrs["data-impl"], n.attrs["fill"]
        if impl:
            seen.setdefault(impl, set()).add(colour)
    return seen


def two_pages(perf, first, other):  # noqa: F811
    """Two rendered pages with different sets of implementations: the perf run plus
    `first` and `other`; then torch_ref, `first`, `other`, FIXED names and, in its
    baseline only, a name seen nowhere else (no torch_tiled)."""
    page_a = render.render(render.build(pd.concat(
        [perf, with_impls(perf, {first: 0.5, other: 0.7})], ignore_index=True)))
    current = pd.concat([perf[perf.impl == "torch_ref"],
                         with_impls(perf, {first: 0.5, other: 0.7, "dao": 0.3, "liger": 2})],
                        ignore_index=True)
    baseline = pd.concat([current, with_impls(perf, {"zz_only_before": 1.5})],
                         ignore_index=True)
    return page_a, render.render(render.build(current, baseline))


def test_same_name_same_colour_on_pages_with_other_implementations(perf):  # noqa: F811
    first, second, other = colliding_names()
    page_a, page_b = two_pages(perf, first, other)
    a, b = page_colours(page_a), page_colours(page_b)
    for seen in (a, b):
        assert all(len(c) == 1 for c in seen.values()), seen  # one colour per name
        colours = [next(iter(c)) for c in seen.values()]
        assert len(set(colours)) == len(colours), seen  # two names never share one
    shared = set(a) & set(b)
    assert {"torch_ref", first, other} <= shared
    assert all(a[n] == b[n] for n in shared)
    # and a collision on one page only moves the later name, on that page only
    page_c = page_colours(render.render(render.build(with_impls(perf, {first: 1, second: 2}))))
    assert page_c[first] == a[first] and page_c[second] != page_c[first]


def test_a_line_per_implementation_per_op(perf):  # noqa: F811
    df = pd.concat([perf, with_impls(perf, {"torch_ref": 1.0, "liger": 0.5, "my_port": 0.8},
                                     op="softmax")], ignore_index=True)
    report = render.build(df)
    html = render.render(report)
    charts = re.findall(r'<svg class="chart" [^>]*aria-label="([a-z_0-9]+): median time.*?</svg>',
                        html, re.S)
    assert sorted(charts) == ["causal_conv1d", "softmax"]
    for svg in re.findall(r'<svg class="chart" [^>]*aria-label="[a-z_0-9]+: median time.*?</svg>',
                          html, re.S):
        op = re.search(r'aria-label="([a-z_0-9]+):', svg).group(1)
        lines = re.findall(r'<polyline class="impl" data-impl="([^"]+)"', svg)
        timed = set(df.loc[df.op == op, "impl"])
        assert sorted(lines) == sorted(timed), op  # one each
        # each line labelled at its end with its name, in its colour
        for impl in timed:
            colour = report.colors[impl]
            assert re.search(rf'<text class="endlabel" [^>]*fill="{colour}"[^>]*>{impl}<', svg)


def test_a_line_joins_the_median_at_each_size_in_order_of_size():
    data = [chart.Datum(x=b, seconds=t, series=s, title="", href="")
            for s, b, t in [("a", 1e6, 1e-5), ("a", 1e8, 1e-3), ("a", 1e8, 4e-3),
                            ("a", 1e8, 2e-3), ("a", 1e7, 1e-4), ("b", 1e7, 1e-3)]]
    c = chart.loglog(data, [("copy", 4000.0)])
    a, b = c.impl_lines
    assert (a.series, b.series) == ("a", "b")
    xy = [tuple(map(float, v.split(","))) for v in a.points.split()]
    assert [x for x, _ in xy] == sorted(x for x, _ in xy) and len(xy) == 3
    at_1e8 = [p for p, d in zip(c.points, data) if d.x == 1e8 and d.seconds == 2e-3][0]
    assert xy[-1] == (at_1e8.x, at_1e8.y)  # the median of 1, 2 and 4 ms
    assert len(b.points.split()) == 1  # a line of one size is one vertex, still its line
    assert (a.lx, a.ly) == (at_1e8.x + 7, at_1e8.y + 4)  # the name right of the last point
    # two lines ending together: their names do not overlap
    same = [chart.Datum(x=1e8, seconds=1e-3, series=s, title="", href="") for s in "ab"]
    a, b = chart.loglog(same, []).impl_lines
    assert a.lx == b.lx and abs(a.ly - b.ly) >= chart.LINE_H
    assert bool(a.leader) != bool(b.leader)  # the one moved off the end points back to it


def test_bars_give_each_implementations_geometric_mean_fraction_of_the_roofline(perf):  # noqa: F811
    df = with_impls(perf, {"torch_ref": 1.0, "liger": 0.5, "slow": 4.0}, op="softmax")
    df.loc[df.index[0], ["verdict", "known_failure"]] = ["fail", "declared"]  # expected: in
    df.loc[df.index[-1], "verdict"] = "fail"  # undeclared: its time is of wrong code, out
    (o,) = render.build(df).roofline
    got = {f.impl: (float(f.geomean.raw), f.n) for f in o.fractions}
    for impl in ("torch_ref", "liger", "slow"):
        rows = df[(df.impl == impl) & ~((df.verdict == "fail") & df.known_failure.isna())]
        want = math.exp(sum(map(math.log, rows.frac_copy_bw)) / len(rows))
        assert got[impl] == (pytest.approx(want), len(rows))
    assert [f.impl for f in o.fractions] == ["liger", "torch_ref", "slow"]  # closest first
    assert [b.series for b in o.bars.bars] == ["liger", "torch_ref", "slow"]
    widths = [b.w for b in o.bars.bars]
    # a linear axis: twice the fraction, twice the length
    assert widths[0] == pytest.approx(2 * widths[1], abs=0.2)
    assert o.bars.xticks[-1].label == "100 %"
    html = render.render(render.build(df))
    assert html.count('<svg class="chart bars"') == 1
    assert f'>{o.fractions[0].geomean.text}</text>' in html
