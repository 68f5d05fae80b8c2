"""The report's compute roofline and memory ledger (issue 39, deliverables 6 and 7): a
compute-bound item is shown against the measured compute peak of its dtype (TFLOP/s and
the fraction of that peak, on its own time-against-flops chart), never as a fraction of
the copy bandwidth; a memory-bound one against the copy bandwidth as before; the memory
ledger sets each item's backward peak and saved bytes against the op's bounds. The
results are synthetic: an attention op timed on an H100 beside a softmax op, written and
read back through the results store."""

import json
import math

import pytest

from bwd_suite.reports import chart, fmt, render
from bwd_suite.suite import results
from bwd_suite.suite.outcomes import Verdict
from bwd_suite.suite.rows import ResultRow
from tests.reports.test_report import Tree, html_of, perf  # noqa: F401

DEVICE = "NVIDIA H100 80GB HBM3"
COPY, PEAK = 3000.0, 778.0  # GB/s, bf16 GEMM TFLOP/s
IMPLS = ("torch_ref", "torch_flash", "torch_cudnn")


def attention_case(name, B, H, L, d):
    flops = 10 * d * H * B * L * L
    nbytes = 2 * 8 * B * H * L * d + 4 * B * H * L
    bounds = {"materialised": 3 * B * L * H * d * 2 + max(B * L * L * H * 2, 3 * B * L * H * d * 2),
              "fused": 3 * B * L * H * d * 2}
    return name, flops, nbytes, bounds


# (case, flops, bytes, bounds), and per implementation (TFLOP/s, backward peak, saved bytes)
BIG = attention_case("B4-H16-L2048-d128", 4, 16, 2048, 128)
SMALL = attention_case("B1-H2-L64-d32", 1, 2, 64, 32)
RATES = {"torch_ref": (120.0, 3 * 2**30, 2**30), "torch_flash": (264.0, 70 * 2**20, None),
         "torch_cudnn": (517.0, 40 * 2**20, 48 * 2**20)}


def row(op, case, impl, t, **cols) -> ResultRow:
    r = ResultRow(run_id="r1", run_started="2026-12-02T10:00:00+00:00", device="cuda:0",
                  device_name=DEVICE, op=op, case_id=f"{op}/perf/{case}", case_group="perf",
                  impl=impl, impl_kind="reference" if impl == "torch_ref" else "native",
                  time_samples_s=[t * (1 + (k - 3.5) / 1000) for k in range(8)],
                  time_median_s=t,
                  time_iqr_s=t * 0.01, timing_method="cuda_events", l2_flush="clean",
                  copy_gbps=COPY, **cols)
    return r.finish(Verdict.PASS)


def attention_rows(case, bounds_json=None):
    name, flops, nbytes, bounds = case
    out = []
    for impl in IMPLS:
        tflops, peak, saved = RATES[impl]
        t = flops / tflops / 1e12
        ai = flops / nbytes
        compute = ai >= PEAK * 1e12 / (COPY * 1e9)
        out.append(row("attention", name, impl, t, bytes=nbytes, flops=flops,
                       gbps=nbytes / t / 1e9, frac_copy_bw=nbytes / t / 1e9 / COPY,
                       arith_intensity=ai, bound="compute" if compute else "memory",
                       tflops=tflops, peak_tflops=PEAK, frac_peak_flops=tflops / PEAK,
                       peak_mem_bytes=peak, saved_bytes=saved,
                       memory_bounds_json=bounds_json or json.dumps(bounds)))
    return out


def softmax_rows():
    n = 4096 * 8192
    out = []
    for impl, t in (("torch_ref", 40e-6), ("torch_flash", 30e-6)):
        out.append(row("softmax", "4096x8192-bf16", impl, t, bytes=6 * n, flops=4 * n,
                       gbps=6 * n / t / 1e9, frac_copy_bw=6 * n / t / 1e9 / COPY,
                       arith_intensity=4 / 6, bound="memory", tflops=4 * n / t / 1e12,
                       peak_tflops=PEAK, frac_peak_flops=4 * n / t / 1e12 / PEAK,
                       peak_mem_bytes=0))
    return out


@pytest.fixture(scope="module")
def frame(tmp_path_factory):
    rows = attention_rows(BIG) + attention_rows(SMALL) + softmax_rows()
    # an item whose op's bounds function raised
    rows += [row("attention", "B1-H2-L0-d32", "torch_ref", 1e-5, bytes=1, flops=1,
                 memory_bounds_json=json.dumps({"error": "KeyError: 'seq_q'"}))]
    path = tmp_path_factory.mktemp("roof") / "run.parquet"
    with results.ResultsWriter(path) as w:
        for r in rows:
            w.add(r)
    return results.read_results([path])


def _at(df, case, impl):
    r = df[df.case_id.str.endswith(case) & (df.impl == impl)]
    assert len(r) == 1
    return r.iloc[0]


def values(html, section, key):
    """{(case, impl): (raw, text)} of one data-k in a section."""
    return {(c, i): (raw, node.all_text()) for c, i, k, raw, node in Tree(html).values(section)
            if k == key}


def test_a_compute_bound_item_is_shown_against_the_compute_peak(frame):
    html = html_of(frame)
    frac_peak = values(html, "roofline", "frac_peak_flops")
    frac_copy = values(html, "roofline", "frac_copy_bw")
    tflops = values(html, "roofline", "tflops")
    big = frame[frame.case_id.str.endswith(BIG[0])]
    assert (big.bound == "compute").all() and len(big) == 3
    for r in big.itertuples():
        raw, text = frac_peak[(r.case_id, r.impl)]
        assert float(raw) == r.frac_peak_flops and text == f"{100 * r.frac_peak_flops:.3g} %"
        assert float(tflops[(r.case_id, r.impl)][0]) == r.tflops
        # its share of the copy bandwidth (3-14 % here) is not shown
        assert r.frac_copy_bw < 0.2 and frac_copy[(r.case_id, r.impl)] == ("", "—")
    small = frame[frame.case_id.str.endswith(SMALL[0]) | (frame.op == "softmax")]
    assert (small.bound == "memory").all()
    for r in small.itertuples():
        assert float(frac_copy[(r.case_id, r.impl)][0]) == r.frac_copy_bw
        assert frac_peak[(r.case_id, r.impl)] == ("", "—")
        assert float(tflops[(r.case_id, r.impl)][0]) == r.tflops  # the raw rate stays


def test_compute_bound_items_get_a_chart_against_the_measured_peak(frame):
    report = render.build(frame)
    attention = [o for o in report.roofline if o.op == "attention"][0]
    softmax = [o for o in report.roofline if o.op == "softmax"][0]
    assert softmax.compute_chart is None and len(softmax.chart.points) == 2
    # the bytes chart: the three memory-bound items and the one without a bound
    assert len(attention.chart.points) == 4
    assert not any(BIG[0] in p.title for p in attention.chart.points)
    c = attention.compute_chart
    assert len(c.points) == 3 and c.x_label.startswith("floating-point operations")
    assert [label for label, _ in attention.peak_lines] == [f"{DEVICE} peak 778 TFLOP/s"]
    assert len(c.lines) == 1 and c.lines[0].label == f"{DEVICE} peak 778 TFLOP/s"
    assert {p.title.split(": ", 1)[1] for p in c.points} == {
        f"{render.fmt.time_text(BIG[1] / t / 1e12)}, {render.fmt.flops_text(BIG[1])}, "
        f"{t:.1f} TFLOP/s, {render.fmt.percent(t / PEAK).text} of peak"
        for t, _, _ in RATES.values()}
    html = render.render(report)
    assert html.count('aria-label="attention: median time against floating-point') == 1
    assert f"Compute-bound items against <span class=\"peak\" data-peak=\"778.0\">" in html


def test_a_point_at_the_peak_sits_on_the_peak_line():
    at_peak = chart.Datum(x=1e13, seconds=1e13 / (PEAK * 1e12), series="k", title="", href="")
    slower = chart.Datum(x=1e12, seconds=10 * 1e12 / (PEAK * 1e12), series="k", title="",
                         href="")
    c = chart.loglog([at_peak, slower], [("peak", PEAK)], axis=chart.FLOPS)
    (line,) = c.lines
    p, q = c.points
    cross = (line.x2 - line.x1) * (p.y - line.y1) - (line.y2 - line.y1) * (p.x - line.x1)
    assert abs(cross) / math.hypot(line.x2 - line.x1, line.y2 - line.y1) < 0.5  # on it
    # a tenth of the peak: a decade above the line, in time
    assert q.y < line.y1 + (line.y2 - line.y1) * (q.x - line.x1) / (line.x2 - line.x1) - 10
    assert c.xticks[0].label.endswith("FLOP") and "compute-peak line" in c.aria


def test_the_memory_ledger_sets_peak_and_saved_bytes_against_each_bound(frame):
    html = html_of(frame)
    tree = Tree(html)
    listed = {(c, i) for c, i, k, _, _ in tree.values("memory-ledger")}
    attention = frame[frame.op == "attention"]
    assert listed == set(zip(attention.case_id, attention.impl))  # softmax declares none
    for case in (BIG, SMALL):
        name, _, _, bounds = case
        for impl in IMPLS:
            r = _at(frame, name, impl)
            for bound, nbytes in bounds.items():
                raw, text = values(html, "memory-ledger", f"peak_ratio:{bound}")[
                    (r.case_id, impl)]
                assert float(raw) == r.peak_mem_bytes / nbytes
                # plain digits, never ×6.55e+04
                assert text == f"×{fmt.plain(r.peak_mem_bytes / nbytes)}" and "e+" not in text
                raw, _ = values(html, "memory-ledger", f"saved_ratio:{bound}")[(r.case_id, impl)]
                if RATES[impl][2] is None:  # no separate forward: nothing saved, no ratio
                    assert raw == ""
                else:
                    assert float(raw) == r.saved_bytes / nbytes
                assert int(values(html, "memory-ledger", f"bound:{bound}")[
                    (r.case_id, impl)][0]) == nbytes
    # the materialised bound of the big case: 3BLH + BL^2N (two bytes an element)
    assert BIG[3]["materialised"] == 3 * 4 * 2048 * 16 * 128 * 2 + 4 * 2048**2 * 16 * 2
    # largest bounds first; the raising hook is said, not hidden
    rows = [n for n in tree.find(lambda n: n.tag == "tr" and "data-case" in n.attrs)
            if n.up("id") == "memory-ledger"]
    assert rows[0].attrs["data-case"].endswith(BIG[0])
    failed = [n for n in rows if n.attrs["data-case"].endswith("L0-d32")][0]
    assert "the op's memory_bounds raised: KeyError: 'seq_q'" in failed.all_text()


def test_speedups_and_details_show_a_compute_bound_items_rate(frame):
    html = html_of(frame)
    tree = Tree(html)
    side = {(c, k): raw for c, _, k, raw, _ in tree.values("side-by-side")}
    for impl in IMPLS:
        big, small = _at(frame, BIG[0], impl), _at(frame, SMALL[0], impl)
        assert float(side[(big.case_id, f"tflops:{impl}")]) == big.tflops
        assert float(side[(big.case_id, f"frac_peak_flops:{impl}")]) == big.frac_peak_flops
        assert (small.case_id, f"tflops:{impl}") not in side  # memory bound: time alone
    details = values(html, "details", "frac_peak_flops")
    big = frame[frame.case_id.str.endswith(BIG[0])]
    assert {k: float(v[0]) for k, v in details.items()} == dict(
        zip(zip(big.case_id, big.impl), big.frac_peak_flops))


def test_the_json_report_holds_the_compute_roofline_and_the_ledger(frame):
    doc = json.loads(render.to_json(render.build(frame)))
    roof = {r["case_id"] + r["impl"]: r for o in doc["roofline"] for r in o["rows"]}
    r = _at(frame, BIG[0], "torch_cudnn")
    assert roof[r.case_id + "torch_cudnn"]["frac_peak_flops"] == r.frac_peak_flops
    assert roof[r.case_id + "torch_cudnn"]["frac_copy_bw"] is None
    assert all("compute_chart" not in o for o in doc["roofline"])  # geometry left out
    (ledger,) = doc["ledger"]
    assert ledger["op"] == "attention" and ledger["names"] == ["materialised", "fused"]


def test_older_results_have_no_compute_chart_and_no_ledger(perf):  # noqa: F811
    report = render.build(perf)
    assert report.ledger == () and all(o.compute_chart is None for o in report.roofline)
    html = render.render(report)
    assert "No op in these results declares bounds" in html
    assert all(raw == "" for _, _, k, raw, _ in Tree(html).values("roofline")
               if k in ("tflops", "frac_peak_flops"))


# -- against a baseline: the changes section and the compare command --------------------------

def slowed(frame, impl="torch_cudnn", factor=1.3):
    """The frame with one compute-bound item `factor` times slower."""
    df = frame.copy()
    i = df.index[df.case_id.str.endswith(BIG[0]) & (df.impl == impl)][0]
    df.at[i, "time_samples_s"] = df.at[i, "time_samples_s"] * factor
    df.loc[i, "time_median_s"] *= factor
    df.loc[i, ["tflops", "frac_peak_flops"]] /= factor
    return df, df.loc[i]


def test_changes_show_a_compute_bound_items_rate_in_both_runs(frame):
    cur, item = slowed(frame)
    tree = Tree(html_of(cur, baseline=frame))
    seen = {(c, i, k): raw for c, i, k, raw, _ in tree.values("changes")}
    key = (item.case_id, item.impl)
    base = _at(frame, BIG[0], "torch_cudnn")
    assert float(seen[key + ("cur_tflops",)]) == item.tflops
    assert float(seen[key + ("cur_frac_peak_flops",)]) == item.frac_peak_flops
    assert float(seen[key + ("base_tflops",)]) == base.tflops
    small = _at(frame, SMALL[0], "torch_cudnn")  # memory bound: the medians alone
    assert (small.case_id, small.impl, "cur_tflops") not in seen
    assert (small.case_id, small.impl, "cur_median_s") in seen


def test_compare_prints_a_compute_bound_items_rate(frame, tmp_path, capsys):
    from bwd_suite.cli import main
    from tests.reports.test_report_cli import write

    cur, item = slowed(frame)
    base_path, cur_path = write(frame, tmp_path / "base.parquet"), write(cur, tmp_path / "c.parquet")
    rate = f"517 -> {item.tflops:.3g} TFLOP/s ({100 * item.frac_peak_flops:.3g} % of peak)"
    assert main(["compare", str(base_path), str(cur_path)]) == 1  # the regression
    out = capsys.readouterr().out
    # in the table of compared timings and in the regressions, both with the rate
    lines = [x for x in out.splitlines() if item.case_id in x and "x1.300" in x]
    assert len(lines) == 2 and all(x.endswith(rate) for x in lines)
    assert main(["compare", str(base_path), str(cur_path), "--format", "markdown"]) == 1
    out = capsys.readouterr().out
    assert "| TFLOP/s (compute bound) |" in out
    assert rate.replace(">", "&gt;") + " |" in out  # a markdown cell escapes its text
    assert main(["compare", str(base_path), str(cur_path), "--format", "json"]) == 1
    items = {(r["case_id"], r["impl"]): r for r in json.loads(capsys.readouterr().out)["items"]
             if "ratio" in r}
    assert items[(item.case_id, item.impl)]["cur_frac_peak_flops"] == item.frac_peak_flops
    assert items[(item.case_id, item.impl)]["base_tflops"] == 517.0
    small = _at(frame, SMALL[0], "torch_cudnn")
    assert items[(small.case_id, small.impl)]["cur_tflops"] is None
    assert main(["compare", str(base_path), str(cur_path), "--format", "csv"]) == 1
    head, *rows = capsys.readouterr().out.splitlines()
    assert head.endswith(",base_tflops,cur_tflops,cur_frac_peak_flops,rerun")  # rerun: issue 40
    assert any(r.startswith("regression,attention,") and r.endswith(
        f",517.0,{float(item.tflops)!r},{float(item.frac_peak_flops)!r},") for r in rows)


def test_history_shows_the_latest_rate_of_a_compute_bound_item(frame):
    cur, item = slowed(frame)
    cur = cur.assign(run_id="r2", run_started="2026-12-03T10:00:00+00:00")
    html = html_of(cur, history=(("night 1", frame), ("night 2", cur)))
    seen = {(c, i, k): raw for c, i, k, raw, _ in Tree(html).values("history")}
    assert float(seen[(item.case_id, item.impl, "latest_tflops")]) == item.tflops
    assert float(seen[(item.case_id, item.impl, "latest_frac_peak_flops")]) == \
        item.frac_peak_flops
    small = _at(frame, SMALL[0], "torch_cudnn")
    assert (small.case_id, small.impl, "latest_median_s") in seen
    assert (small.case_id, small.impl, "latest_tflops") not in seen
