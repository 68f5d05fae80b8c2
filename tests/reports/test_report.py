"""The HTML report: autoescaping, self-containment, numbers read back from the page equal
the parquet values, the diagnosis column, links, big runs, and baseline notices.

The page is read back through the data attributes it emits (`data-k` names the column,
`data-v` holds the full-precision value) with the standard library's HTML parser.
"""

import json
import math
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

from bwd_suite.reports import fmt, render
from bwd_suite.suite.regression import Rule
from bwd_suite.suite.reproduce import rerun_command
from bwd_suite.suite.results import read_results

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
# the H200 foundation run: torch_ref and torch_tiled, the perf and the gpu profile
PERF = DATA / "h200-foundation-perf.parquet"
GPU = DATA / "h200-foundation-gpu.parquet"
XSS = '<script>alert("x")</script>'


# -- data -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def perf() -> pd.DataFrame:
    """The H200 perf run: torch_ref and torch_tiled on 19 cases, timed."""
    return read_results([PERF])


@pytest.fixture(scope="module")
def gpu() -> pd.DataFrame:
    """The H200 gpu-profile run: 968 passing torch_ref items."""
    return read_results([GPU])


def with_failures(df: pd.DataFrame, every: int = 3, diagnosis: bool = True) -> pd.DataFrame:
    """Every `every`-th row turned into a mismatch of its first output."""
    df = df.copy().reset_index(drop=True)
    bad = df.index % every == 0
    df.loc[bad, "verdict"] = "fail"
    df.loc[bad, "failure_kind"] = "mismatch"
    df.loc[bad, "reason"] = "dx mismatch: error 0.5 of max|golden| > allowed"
    df.loc[bad, "det_spread"] = 1.5e-3
    df["outputs"] = [[dict(o, err=o["allowed"] * (3 + k), n_bad=17 + k, max_abs=0.25 + k,
                           rel_l2=0.125, worst_index=f"[0, {k}]") if j == 0 else dict(o)
                      for j, o in enumerate(outs)] if b else list(outs)
                     for k, (outs, b) in enumerate(zip(df["outputs"], bad))]
    if diagnosis:
        df["diagnosis"] = [f"likely right halo missing (row {k})" if b else None
                           for k, b in enumerate(bad)]
        df["diagnosis_cause"] = ["right_halo" if b else None for b in bad]
    elif "diagnosis" in df:
        df = df.drop(columns=["diagnosis", "diagnosis_cause"])
    return df


def html_of(df, baseline=None, **options) -> str:
    return render.render(render.build(df, baseline, render.Options(**options)))


# what a page may run: its own inline script, nothing that reaches the network
NETWORK = ("fetch(", "xmlhttprequest", "websocket", "eventsource", "sendbeacon", "import(",
           "src=", "http:", "https:", "url(", ".cookie", "localstorage")


def without_page_script(html: str) -> str:
    """The page less its one inline script (reports/templates/page.js; issue 40): what is
    left must run nothing, so a `<script` there came from the data."""
    own = "<script>\n" + str(render._script()) + "\n</script>"
    assert html.count(own) == 1
    return html.replace(own, "")


# -- reading the page back ---------------------------------------------------------------

class Node:
    def __init__(self, tag, attrs, parent):
        self.tag, self.attrs, self.parent = tag, dict(attrs), parent
        self.children, self.text = [], ""

    def iter(self):
        yield self
        for c in self.children:
            yield from c.iter()

    def all_text(self) -> str:
        return self.text + "".join(c.all_text() for c in self.children)

    def up(self, attr):
        """The nearest value of `attr` on this node or an ancestor."""
        n = self
        while n is not None and attr not in n.attrs:
            n = n.parent
        return n.attrs[attr] if n is not None else None


class Tree(HTMLParser):
    VOID = {"meta", "br", "img", "input", "hr", "link", "wbr"}

    def __init__(self, html: str):
        super().__init__()
        self.root = self.cur = Node("root", {}, None)
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        node = Node(tag, attrs, self.cur)
        self.cur.children.append(node)
        if tag not in self.VOID:
            self.cur = node

    def handle_startendtag(self, tag, attrs):
        self.cur.children.append(Node(tag, attrs, self.cur))

    def handle_endtag(self, tag):
        n = self.cur
        while n is not None and n.tag != tag:
            n = n.parent
        if n is not None and n.parent is not None:
            self.cur = n.parent

    def handle_data(self, data):
        self.cur.text += data

    def find(self, pred):
        return [n for n in self.root.iter() if pred(n)]

    def values(self, section: str) -> list:
        """(case, impl, key, raw value, node) of every data-k inside a section."""
        sec = self.find(lambda n: n.tag == "section" and n.attrs.get("id") == section)
        assert sec, section
        return [(n.up("data-case"), n.up("data-impl"), n.attrs["data-k"], n.attrs.get("data-v"), n)
                for n in sec[0].iter() if "data-k" in n.attrs]


def _row(df, case, impl):
    r = df[(df.case_id == case) & (df.impl == impl)]
    assert len(r) == 1, (case, impl)
    return r.iloc[0]


# -- escaping and self-containment ---------------------------------------------------------

def test_case_ids_reasons_and_diagnoses_are_escaped(perf):
    df = with_failures(perf, every=2)
    df.loc[0, "case_id"] = df.loc[0, "case_id"] + XSS
    df.loc[0, "reason"] = "bad " + XSS
    df.loc[0, "diagnosis"] = "likely " + XSS
    df.loc[1, "impl"] = 'x" onmouseover="alert(1)'
    html = html_of(df)
    assert "<script" not in without_page_script(html).lower() and "onmouseover=\"" not in html
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in html
    tree = Tree(html)
    texts = [n.all_text() for n in tree.find(lambda n: n.attrs.get("data-k") == "reason")]
    assert "bad " + XSS in texts  # shown as text, verbatim
    assert any(df.loc[0, "case_id"] == n.attrs.get("data-case") for n in tree.root.iter())


def test_page_is_self_contained(perf, gpu):
    html = html_of(pd.concat([with_failures(perf), gpu], ignore_index=True))
    low = without_page_script(html).lower()
    for banned in ("<script", "<link", "@import", "url(", "src=", "http://", "https://"):
        assert banned not in low, banned
    assert "<style>" in html and "<svg" in html
    # its one script is inline and reaches nothing outside the page
    script = str(render._script()).lower()
    assert [w for w in NETWORK if w in script] == []


def test_every_internal_link_has_a_target(perf, gpu):
    tree = Tree(html_of(pd.concat([with_failures(perf), with_failures(gpu, every=50)],
                                  ignore_index=True), cap=20))
    ids = {n.attrs["id"] for n in tree.root.iter() if "id" in n.attrs}
    hrefs = [n.attrs["href"] for n in tree.root.iter() if n.attrs.get("href", "").startswith("#")]
    assert len(hrefs) > 1000
    assert {h[1:] for h in hrefs} <= ids


# -- numbers equal the parquet values ------------------------------------------------------

ROOFLINE = ("bytes", "time_median_s", "time_iqr_s", "gbps", "frac_copy_bw", "arith_intensity")


def test_roofline_numbers_equal_the_parquet(perf):
    tree = Tree(html_of(perf))
    seen = set()
    for case, impl, key, raw, node in tree.values("roofline"):
        r = _row(perf, case, impl)
        if key in ROOFLINE:
            assert float(raw) == r[key], (case, impl, key)
            seen.add((case, impl, key))
        elif key == "n_samples":
            assert int(raw) == len(r["time_samples_s"])
        elif key == "bound":
            assert node.all_text() == r["bound"]
    assert len(seen) == len(perf) * len(ROOFLINE)
    rows = tree.find(lambda n: n.tag == "tr" and n.attrs.get("id", "").startswith("r"))
    assert len(rows) == len(perf)


def test_roofline_shows_each_items_fraction_of_its_same_bytes_copy(perf):
    df = perf.assign(frac_same_copy=[0.5 + k / 1000 for k in range(len(perf))])
    shown = {(case, impl): (raw, node.all_text())
             for case, impl, key, raw, node in Tree(html_of(df)).values("roofline")
             if key == "frac_same_copy"}
    assert len(shown) == len(df)
    for r in df.itertuples():
        raw, text = shown[(r.case_id, r.impl)]
        assert float(raw) == r.frac_same_copy and text == f"{100 * r.frac_same_copy:.3g} %"
    # runs older than the column (schema version 2) show empty cells, nothing invented
    assert perf.frac_same_copy.isna().all()
    old = [node.all_text() for _, _, key, _, node in Tree(html_of(perf)).values("roofline")
           if key == "frac_same_copy"]
    assert len(old) == len(perf) and not any(any(c.isdigit() for c in t) for t in old)


def test_roofline_shows_wall_time_and_launches(perf):
    df = perf.assign(wall_median_ms=[0.25 + k for k in range(len(perf))],
                     launches=[k % 3 + 1 for k in range(len(perf))])
    shown = {(case, impl, key): (raw, node.all_text())
             for case, impl, key, raw, node in Tree(html_of(df)).values("roofline")
             if key in ("wall_median_ms", "launches")}
    assert len(shown) == 2 * len(df)
    for r in df.itertuples():
        raw, text = shown[(r.case_id, r.impl, "wall_median_ms")]
        assert float(raw) == r.wall_median_ms and text == fmt.seconds(r.wall_median_ms / 1e3).text
        raw, text = shown[(r.case_id, r.impl, "launches")]
        assert int(raw) == r.launches == int(text)
    # a run of schema 7 has neither: empty cells
    old = [raw for _, _, key, raw, _ in Tree(html_of(perf)).values("roofline")
           if key in ("wall_median_ms", "launches")]
    assert len(old) == 2 * len(perf) and not any(old)


def test_item_details_show_the_ops_statistics(perf):
    df = perf.reset_index(drop=True).assign(stats_json=None)
    df.loc[0, "stats_json"] = '{"swallowed_fraction": 0.953125, "n_elements": 341}'
    df.loc[1, "stats_json"] = json.dumps({"error": "KeyError: " + XSS})
    html = html_of(df)
    assert "<script" not in without_page_script(html).lower()
    tree = Tree(html)
    stats = {(case, impl, key): (raw, node.all_text())
             for case, impl, key, raw, node in tree.values("details")
             if key in ("swallowed_fraction", "n_elements", "error")}
    first = (df.case_id[0], df.impl[0])
    assert stats[first + ("swallowed_fraction",)] == ("0.953125", "swallowed_fraction 0.953")
    assert stats[first + ("n_elements",)] == ("341", "n_elements 341")
    assert stats[(df.case_id[1], df.impl[1], "error")][1] == "error KeyError: " + XSS
    assert len(stats) == 3
    heads = [n for n in tree.find(lambda n: n.tag == "th") if n.all_text() == "statistics"]
    assert heads  # only where a sweep has statistics
    assert "statistics</th>" not in html_of(perf)
    doc = json.loads(render.to_json(render.build(df, None, render.Options())))
    rows = [d for g in doc["details"] for d in g["rows"] if d["stats"]]
    assert {"swallowed_fraction": 0.953125, "n_elements": 341} in [d["stats"] for d in rows]


def test_item_details_show_what_the_implementation_reported(perf):
    df = perf.reset_index(drop=True).assign(stats_json=None, impl_facts_json=None)
    df.loc[0, "stats_json"] = '{"epilogue_saved_bytes": 4096}'
    df.loc[0, "impl_facts_json"] = json.dumps({"dgrad_epilogue": "DGELU", "dgrad_split_k": 1,
                                               "note": XSS})
    html = html_of(df)
    assert "<script" not in without_page_script(html).lower()
    first = (df.case_id[0], df.impl[0])
    shown = {key: node.all_text() for case, impl, key, raw, node in Tree(html).values("details")
             if (case, impl) == first}
    assert shown["epilogue_saved_bytes"] == "epilogue_saved_bytes 4,096"
    assert shown["dgrad_epilogue"] == "dgrad_epilogue DGELU"
    assert shown["dgrad_split_k"] == "dgrad_split_k 1" and shown["note"] == "note " + XSS


def test_chart_draws_the_same_bytes_copies_where_the_run_timed_them(perf):
    from bwd_suite.reports import chart

    data = [chart.Datum(x=b, seconds=t, series="k", title="", href="")
            for b, t in [(1e6, 2e-5), (1e8, 3e-4), (4e8, 1e-3)]]
    # a copy as fast as the item at its bytes lands on the item's point
    c = chart.loglog(data, [("copy", 4000.0)], copies=[(4e8, 1e-3), (1e6, 1e-5), (1e6, 1e-5)])
    vertices = [tuple(map(float, v.split(","))) for v in c.copy_curve.split()]
    assert len(vertices) == 2 and vertices[0][0] < vertices[1][0]
    assert vertices[1] == (c.points[2].x, c.points[2].y)
    assert vertices[0][1] > c.points[0].y  # 10 us sits below the 20 us point
    assert c.copy_legend.label == chart.COPY_CURVE_LABEL
    assert chart.loglog(data, [("copy", 4000.0)]).copy_curve == ""

    df = perf.assign(same_copy_s=perf["bytes"] / 4e12)
    html = html_of(df)
    assert html.count('<polyline class="samecopy"') == perf["op"].nunique()
    assert chart.COPY_CURVE_LABEL in html
    assert "<polyline class=\"samecopy\"" not in html_of(perf)  # no copies, no curve


def test_failure_metrics_and_diagnosis_equal_the_parquet(perf):
    df = with_failures(perf)
    tree = Tree(html_of(df))
    checked = reruns = 0
    for case, impl, key, raw, node in tree.values("failures"):
        r = _row(df, case, impl)
        if key == "det_spread":
            assert float(raw) == r["det_spread"]
        elif key == "diagnosis":
            assert node.all_text().startswith(r["diagnosis"])
            assert r["diagnosis_cause"] in node.all_text()
        elif key == "reason":
            assert node.all_text() == r["reason"]
        elif key == "rerun":  # the command every output prints for the item (issue 40)
            assert node.tag == "code" and node.all_text() == rerun_command(r)
            assert node.all_text().startswith("python -m bwd_suite run --case ")
            reruns += 1
        else:
            out = {o["name"]: o for o in r["outputs"]}[_output_of(node)]
            if key == "worst_index":
                assert node.all_text() == out["worst_index"]
            elif key == "over":
                assert float(raw) == pytest.approx(out["err"] / out["allowed"], rel=1e-15)
            else:
                assert float(raw) == out[key], (case, impl, key)
            checked += 1
    n_fail = int((df.verdict == "fail").sum())
    assert checked == n_fail * 7  # err, allowed, over, max_abs, rel_l2, n_bad, worst_index
    assert reruns == n_fail
    header = [n.all_text() for n in tree.find(lambda n: n.tag == "th")]
    assert "diagnosis" in header


def _output_of(node):
    """The output name of the metrics row a cell belongs to."""
    row = node.parent
    return next(c.attrs["data-output"] for c in row.children if "data-output" in c.attrs)


def test_summary_counts_equal_the_parquet(perf, gpu):
    df = pd.concat([with_failures(perf), gpu], ignore_index=True)
    tree = Tree(html_of(df))
    summary = tree.find(lambda n: n.tag == "section" and n.attrs.get("id") == "summary")[0]
    rows = [n for n in summary.iter()
            if n.tag == "tr" and "data-impl" in n.attrs and "data-op" in n.attrs]
    assert len(rows) == df.groupby(["op", "impl"]).ngroups
    for tr in rows:
        sub = df[(df.op == tr.attrs["data-op"]) & (df.impl == tr.attrs["data-impl"])]
        for n in tr.iter():
            key = n.attrs.get("data-k", "")
            if key == "items":
                assert int(n.attrs["data-v"]) == len(sub)
            elif key.startswith("verdict:"):
                assert int(n.attrs["data-v"]) == (sub.verdict == key[8:]).sum()
            elif key.startswith("determinism:"):
                assert int(n.attrs["data-v"]) == (sub.determinism == key[12:]).sum()


def test_run_summary_names_the_l2_flush_of_the_timed_rows():
    from bwd_suite.reports.summary import _runs

    df = pd.DataFrame({"run_id": ["r"] * 3, "run_started": ["t"] * 3,
                       "l2_flush": ["clean", None, "clean"], "copy_gbps": [1.0, None, 1.0]})
    assert dict(_runs(df)[0].fields)["L2 flush"] == "clean"  # untimed rows left out
    df.loc[1, "l2_flush"] = "dirty"
    assert dict(_runs(df)[0].fields)["L2 flush"] == "clean, dirty"
    df["timing_pacing"] = ["hold", None, "hold"]
    assert dict(_runs(df)[0].fields)["GPU pacing"] == "hold"


def test_speedups_and_their_geometric_mean_equal_the_parquet(perf):
    df = with_failures(perf, every=7)
    tree = Tree(html_of(df))
    t = df.pivot(index="case_id", columns="impl", values="time_median_s")
    ok = df.pivot(index="case_id", columns="impl", values="verdict") == "pass"
    both = ok["torch_ref"] & ok["torch_tiled"]
    ratios = (t["torch_ref"] / t["torch_tiled"])[both]
    want = math.exp(sum(map(math.log, ratios)) / len(ratios))
    values = {(c, k): raw for c, _, k, raw, _ in tree.values("side-by-side")}
    assert float(values[(None, "geomean:torch_tiled")]) == pytest.approx(want, rel=1e-12)
    for case in t.index:
        assert float(values[(case, "median:torch_tiled")]) == t.at[case, "torch_tiled"]
        assert float(values[(case, "speedup:torch_tiled")]) == pytest.approx(
            t.at[case, "torch_ref"] / t.at[case, "torch_tiled"], rel=1e-15)


def test_speedups_are_coloured_only_when_the_samples_differ_significantly(perf):
    from bwd_suite.reports import speedup
    df = perf.copy().reset_index(drop=True)
    cases = sorted(df["case_id"].unique())[:3]
    spread = [1 + 0.005 * ((7 * k) % 20 - 10) for k in range(20)]  # within +-5 %
    # torch_tiled against torch_ref: twice as fast; 2 % faster inside a +-5 % spread;
    # 0.3 % slower with no spread at all
    for case, scale, noise in [(cases[0], 0.5, spread), (cases[1], 0.98, spread),
                               (cases[2], 1.003, [1.0] * 20)]:
        base = [1e-3 * x for x in noise]
        for impl, samples in [("torch_ref", base), ("torch_tiled", [x * scale for x in base])]:
            i = df.index[(df["case_id"] == case) & (df["impl"] == impl)][0]
            df.at[i, "time_samples_s"] = samples
            df.at[i, "time_median_s"] = sorted(samples)[10]
    cells = {c: n for c, _, k, _, n in Tree(html_of(df)).values("side-by-side")
             if k == "speedup:torch_tiled"}
    tone = {c: set(cells[c].attrs["class"].split()) - {"speed", "invalid"} for c in cases}
    p = {c: float(cells[c].attrs["data-p"]) for c in cases}
    assert tone[cases[0]] == {"faster"} and p[cases[0]] < speedup.ALPHA
    assert tone[cases[1]] == set() and p[cases[1]] > speedup.ALPHA  # level: noise
    assert tone[cases[2]] == set() and p[cases[2]] < speedup.ALPHA  # within SAME
    # --alpha of the report: at alpha 1 every testable difference beyond SAME counts
    loose = {c: n for c, _, k, _, n in Tree(html_of(df, rule=Rule(alpha=1.0)))
             .values("side-by-side") if k == "speedup:torch_tiled"}
    assert "faster" in loose[cases[1]].attrs["class"].split()


def test_speedup_tone_rule():
    from bwd_suite.reports.speedup import p_value, tone
    a = [1.0, 1.1, 1.2, 1.3, 1.4, 1.5]
    assert p_value(a, [x + 10 for x in a]) < 0.01
    assert p_value(a, a[::-1]) == pytest.approx(1.0)
    assert p_value(a[:2], a) is None  # too few samples: untestable
    assert tone(1.02, 0.5) == "" and tone(1.02, 0.001) == "faster"
    assert tone(0.95, None) == "slower"  # no samples: the threshold alone decides
    assert tone(1.005, 0.0) == "" and tone(None, None) == ""


def test_baseline_implementation_can_be_chosen(perf):
    tree = Tree(html_of(perf, baseline_impl="torch_tiled"))
    table = tree.find(lambda n: n.tag == "table" and "data-baseline" in n.attrs)
    assert [n.attrs["data-baseline"] for n in table] == ["torch_tiled"]
    html = html_of(perf, baseline_impl="no_such_impl")
    assert "has no timed results for causal_conv1d" in html


# -- the diagnosis column and unknown columns --------------------------------------------

def _headers(html):
    sec = [n for n in Tree(html).root.iter() if n.attrs.get("id") == "failures"][0]
    return [n.all_text() for n in sec.iter() if n.tag == "th"]


def test_diagnosis_column_only_when_the_results_carry_one(perf):
    assert "diagnosis" in _headers(html_of(with_failures(perf)))
    assert "diagnosis" not in _headers(html_of(with_failures(perf, diagnosis=False)))
    nulls = with_failures(perf).assign(diagnosis=None, diagnosis_cause=None)
    assert "diagnosis" not in _headers(html_of(nulls))  # version-1 files, upgraded


def test_unknown_columns_are_tolerated(perf):
    df = with_failures(perf).assign(error_location_dim=3, some_future_column=[{"a": 1}] * len(perf))
    html = html_of(df)
    assert "some_future_column" not in html and "causal_conv1d" in html


# -- big runs, listing caps ----------------------------------------------------------------

def test_big_sweeps_list_failing_cases_first_and_count_the_rest(gpu):
    df = gpu.copy()
    last = df.index[df.case_group == "boundaries"][-1]  # a failure at the end of the sweep
    df.loc[last, ["verdict", "failure_kind", "reason"]] = ["error", "exception", "boom"]
    report = render.build(df, options=render.Options(cap=5))
    group = [g for m in report.matrix for g in m.groups if g.name == "boundaries"][0]
    assert len(group.rows) == 5 and group.open
    assert group.rows[0].case_id == df.loc[last, "case_id"]
    assert group.n_hidden == df[df.case_group == "boundaries"].case_id.nunique() - 5
    assert sum(t.n for t in group.hidden_tallies) == group.n_hidden  # one impl
    assert report.summary.total.items.raw == str(len(df))  # counts cover every row
    assert any("cases are not listed" in n.text for n in report.notices)


def big_frame(perf, gpu, n=20_000) -> pd.DataFrame:
    """n rows from the real runs, as 4 implementations x many distinct cases."""
    src = pd.concat([perf, gpu], ignore_index=True)
    parts, k = [], 0
    while sum(map(len, parts)) < n:
        parts.append(src.assign(case_id=src.case_id + f"-r{k // 4}", impl=src.impl + f"_{k % 4}"))
        k += 1
    return with_failures(pd.concat(parts, ignore_index=True).iloc[:n], every=9)


def test_twenty_thousand_rows_render_small(perf, gpu, tmp_path):
    """The page stays small; its render time is a benchmark (scripts/bench_report.py), not
    a unit test: this machine's speed varies."""
    big = big_frame(perf, gpu)
    slower = big.copy()
    slower["time_median_s"] = slower["time_median_s"] * 1.3
    slower["time_samples_s"] = [s * 1.3 for s in slower["time_samples_s"]]
    path = render.write(render.build(slower, big), tmp_path / "big.html")
    size = path.stat().st_size
    assert size < 10e6, size
    html = path.read_text()
    assert "Regressions" in html and "20,000" in html


# -- baselines -----------------------------------------------------------------------------

def test_baseline_without_common_cases_gives_a_notice(perf, gpu):
    report = render.build(perf, gpu)
    assert report.changes is None
    assert any("shares no" in n.text for n in report.notices)
    assert "there is nothing to compare" in render.render(report)


def test_planted_regression_and_new_failure_are_shown(perf):
    cur = perf.copy()
    case = cur.case_id[4]
    cur.loc[4, "time_median_s"] *= 1.3
    cur.at[4, "time_samples_s"] = cur.at[4, "time_samples_s"] * 1.3
    cur.loc[7, ["verdict", "failure_kind", "reason"]] = ["fail", "mismatch", "planted"]
    report = render.build(cur, perf, render.Options(rule=Rule()))
    assert report.changes.gate_failed
    tree = Tree(render.render(report))
    regress = tree.find(lambda n: n.tag == "table" and "regressions" in n.attrs.get("class", ""))
    rows = [n for n in regress[0].iter() if n.tag == "tr" and "data-case" in n.attrs]
    assert [(r.attrs["data-case"], r.attrs["data-impl"]) for r in rows] == \
        [(case, cur.impl[4])]
    ratio = [n for n in rows[0].iter() if n.attrs.get("data-k") == "ratio"][0]
    assert float(ratio.attrs["data-v"]) == pytest.approx(1.3)
    fails = tree.find(lambda n: n.tag == "table" and "new-failures" in n.attrs.get("class", ""))
    assert [n.attrs["data-case"] for n in fails[0].iter() if n.tag == "tr"
            and "data-case" in n.attrs] == [cur.case_id[7]]


def test_untimed_results_render(perf):
    df = perf.assign(time_median_s=None, time_iqr_s=None, gbps=None, frac_copy_bw=None,
                     time_samples_s=None)
    html = html_of(with_failures(df))
    assert "hold no timings" in html and "No timed items" in html
