"""The report's treatment of known failures and unexpected passes, failures grouped by
diagnosed cause, the full table of ratios, the gate's banner when nothing was compared,
one colour per implementation, the per-op baseline implementation, wide tables that
scroll in their own box, and the JSON form of the report (issue 24)."""

import json
import re

import pandas as pd
import pytest

from bwd_suite.reports import palette, render, speedup
from bwd_suite.suite.regression import mann_whitney_u
from tests.reports.test_report import Tree, gpu, perf, with_failures  # noqa: F401

DAO_PADDING = ("padding ids (seq_idx < 0) are treated as an ordinary sequence id in the "
               "backward (dout not zeroed at padding steps)")


def with_dao(df: pd.DataFrame, fail_padding: bool = True, declare: bool = True) -> pd.DataFrame:
    """The gpu run plus Dao's two adapters on the same cases: every case passes but the
    padding ones, which fail as Dao's adapter declares (kernels/causal_conv1d/dao.py)."""
    parts = [df]
    for impl in ("dao", "dao_det"):
        d = df.copy()
        d["impl"], d["impl_kind"] = impl, "vendor"
        pad = d["case_id"].str.contains("-pack-padding")
        if declare:
            d.loc[pad, "known_failure"] = DAO_PADDING
        if fail_padding:
            d.loc[pad, ["verdict", "failure_kind", "reason"]] = [
                "fail", "mismatch", "dx mismatch at the padding steps"]
        parts.append(d)
    return pd.concat(parts, ignore_index=True)


def n_padding(df) -> int:
    return int((df["case_id"].str.contains("-pack-padding") & df["impl"].str.startswith("dao"))
               .sum())


def section(tree, name):
    return [n for n in tree.root.iter() if n.attrs.get("id") == name][0]


# -- known failures -------------------------------------------------------------------------

@pytest.mark.parametrize("baseline_has_dao", [False, True])
def test_declared_padding_failures_are_expected_not_new(gpu, baseline_has_dao):  # noqa: F811
    """Dao's documented padding failures: not new failures, no red banner, listed apart."""
    cur = with_dao(gpu)
    base = with_dao(gpu, fail_padding=False, declare=False) if baseline_has_dao else gpu
    n = n_padding(cur)
    assert n == 26
    report = render.build(cur, base)
    c = report.changes
    assert not c.gate_failed and c.tone == "ok" and c.n_known == n
    keys = {x.key: x for x in c.listings}
    assert "new-failures" not in keys and "failing-new-cases" not in keys
    assert keys["known-failures"].n_total == n
    assert report.failures.n_total == 0 and report.failures.n_expected == n
    assert report.known.n_total == n and sum(g.n_items for g in report.known.groups) == n
    assert {(g.impl, g.declared) for g in report.known.groups} == {("dao", DAO_PADDING),
                                                                   ("dao_det", DAO_PADDING)}
    html = render.render(report)
    tree = Tree(html)
    gate = [x for x in tree.root.iter() if "data-gate" in x.attrs][0]
    assert gate.attrs["data-gate"] == "ok" and "Regressed" not in gate.all_text()
    assert f"{n} known failures (expected)" in gate.all_text()
    known = section(tree, "known-failures")
    assert "Known failures (expected)" in known.all_text()
    listed = [x for x in known.iter() if x.tag == "tr" and "data-case" in x.attrs]
    assert len(listed) == n
    # each declared item carries the command that reruns it alone, as a failure does
    for tr in listed:
        (code,) = [x for x in tr.iter() if x.attrs.get("data-k") == "rerun"]
        cmd = code.all_text()
        assert f"--case '{tr.attrs['data-case']}$'" in cmd and f"--impl {tr.attrs['data-impl']}" in cmd
    cells = [x for x in tree.root.iter() if x.attrs.get("data-state") == "known"]
    assert len(cells) == n  # matrix cells marked as expected
    assert not [x for x in tree.root.iter() if x.tag == "tbody"
                and x.attrs.get("class") == "failure"]
    # the summary still counts them as failures, and apart as expected
    row = [x for x in tree.root.iter() if x.attrs.get("data-impl") == "dao"
           and "data-op" in x.attrs][0]
    vals = {x.attrs["data-k"]: x.attrs["data-v"] for x in row.iter() if "data-k" in x.attrs}
    assert vals["verdict:fail"] == vals["expected"] == str(n // 2) and vals["xpass"] == "0"
    assert "bad" not in row.attrs.get("class", "")


def test_undeclared_failures_of_new_cases_are_listed_apart_from_new_failures(gpu):  # noqa: F811
    base = with_dao(gpu, fail_padding=False, declare=False)
    base = base[~(base["impl"] == "dao_det")]  # dao_det is new in the current run
    cur = with_dao(gpu, declare=False)
    c = render.build(cur, base).changes
    keys = {x.key: x for x in c.listings}
    assert c.gate_failed and c.tone == "bad"
    assert keys["new-failures"].n_total == n_padding(cur) // 2  # dao: passed before
    assert keys["failing-new-cases"].n_total == n_padding(cur) // 2  # dao_det: new
    assert {r.impl for r in keys["new-failures"].rows} == {"dao"}
    assert {r.before for r in keys["failing-new-cases"].rows} == {""}


def test_an_unexpected_pass_fails_the_gate_and_shows_in_the_summary(gpu):  # noqa: F811
    cur = with_dao(gpu)
    pad = cur.index[cur["case_id"].str.contains("-pack-padding") & (cur["impl"] == "dao")]
    cur.loc[pad[0], ["verdict", "failure_kind", "reason"]] = ["pass", None, ""]
    report = render.build(cur, with_dao(gpu))
    assert report.changes.gate_failed and report.changes.n_unexpected_passes == 1
    assert report.summary.n_unexpected_passes == 1
    tree = Tree(render.render(report))
    summary = section(tree, "summary")
    rows = [x for x in summary.iter() if x.tag == "tr" and "data-case" in x.attrs]
    assert [(r.attrs["data-case"], r.attrs["data-impl"]) for r in rows] == [
        (cur.loc[pad[0], "case_id"], "dao")]
    assert "Unexpected passes (1)" in summary.all_text()
    counts = [x for x in summary.iter() if x.attrs.get("data-impl") == "dao"
              and "data-op" in x.attrs][0]
    assert "bad" in counts.attrs["class"]
    assert [x.attrs["data-v"] for x in counts.iter() if x.attrs.get("data-k") == "xpass"] == ["1"]
    assert [x for x in tree.root.iter() if x.attrs.get("data-state") == "xpass"]
    assert any("unexpected pass" in n.text for n in report.notices)


def test_timeout_is_a_failure_with_its_own_style(perf):  # noqa: F811
    df = perf.copy()
    df.loc[2, ["verdict", "failure_kind", "reason"]] = ["timeout", "timeout", "outlived 60 s"]
    report = render.build(df)
    assert report.failures.n_total == 1
    html = render.render(report)
    assert 'data-verdict="timeout"' in html and ".v-timeout" in html


# -- failures by diagnosed cause -----------------------------------------------------------

def test_failures_are_grouped_by_diagnosed_cause(perf):  # noqa: F811
    df = with_failures(perf, every=2)
    bad = df.index[df["verdict"] == "fail"]
    causes = ["right_halo", "right_halo", "left_halo", None] * len(bad)
    df.loc[bad, "diagnosis_cause"] = causes[:len(bad)]
    f = render.build(df).failures
    want = pd.Series(causes[:len(bad)]).fillna("unclassified").value_counts()
    assert [(g.cause, g.n_items) for g in f.groups] == [
        ("right_halo", want["right_halo"]), ("left_halo", want["left_halo"]),
        ("unclassified", want["unclassified"])]
    assert sum(g.n_items for g in f.groups) == f.n_total == len(bad)
    tree = Tree(render.render(render.build(df)))
    entries = [x for x in tree.root.iter() if x.tag == "tbody"
               and x.attrs.get("class") == "failure"]
    by_case = dict(zip(df.loc[bad, "case_id"] + "|" + df.loc[bad, "impl"],
                       pd.Series(causes[:len(bad)], index=bad).fillna("unclassified")))
    for e in entries:
        assert e.attrs["data-cause"] == by_case[e.attrs["data-case"] + "|" + e.attrs["data-impl"]]
    heads = [x.attrs["data-cause"] for x in tree.root.iter() if x.tag == "tbody"
             and x.attrs.get("class") == "grouphead"]
    assert heads == ["right_halo", "left_halo", "unclassified"]


# -- changes: every ratio, and a comparison of nothing --------------------------------------

def test_changes_list_every_compared_timing_flagged_first(perf):  # noqa: F811
    cur = perf.copy()
    cur.loc[4, "time_median_s"] *= 1.3
    cur.at[4, "time_samples_s"] = cur.at[4, "time_samples_s"] * 1.3
    report = render.build(cur, perf)
    ratios = report.changes.ratios
    assert ratios.n_total == len(perf) and len(ratios.rows) == len(perf)
    assert ratios.rows[0].case_id == cur.case_id[4] and ratios.rows[0].change == "regression"
    assert {r.change for r in ratios.rows[1:]} == {"unchanged"}
    tree = Tree(render.render(report))
    table = [x for x in tree.root.iter() if x.tag == "table"
             and "ratios" in x.attrs.get("class", "").split()]
    rows = [x for t in table for x in t.iter() if x.tag == "tr" and "data-case" in x.attrs]
    assert len(rows) == len(perf)
    assert rows[0].attrs["data-change"] == "regression"
    for tr in rows:
        vals = {x.attrs["data-k"]: x for x in tr.iter() if "data-k" in x.attrs}
        case, impl = tr.attrs["data-case"], tr.attrs["data-impl"]
        a = cur[(cur.case_id == case) & (cur.impl == impl)].iloc[0]
        b = perf[(perf.case_id == case) & (perf.impl == impl)].iloc[0]
        assert float(vals["ratio"].attrs["data-v"]) == pytest.approx(
            a.time_median_s / b.time_median_s)
        assert float(vals["p"].attrs["data-v"]) == pytest.approx(
            mann_whitney_u(a.time_samples_s, b.time_samples_s).p)
        planted = (case, impl) == (cur.case_id[4], cur.impl[4])
        assert (vals["flag"].all_text() == "regression") == planted


def test_a_baseline_timed_after_another_flush_gives_a_warning_banner(perf):  # noqa: F811
    cur = perf.assign(l2_flush="clean")
    report = render.build(cur, perf)
    assert report.changes.tone == "warn" and "different L2 flushes" in report.changes.vacuous
    assert report.changes.ratios is None
    html = render.render(report)
    assert 'data-gate="warn"' in html and "Not compared: no timed item could be compared" in html
    assert any("No timed item could be compared" in n.text for n in report.notices)


# -- colours -------------------------------------------------------------------------------

def test_palette_is_stable_and_distinct():
    names = [f"impl_{k}" for k in range(len(palette.PALETTE) - 2)] + ["torch_ref", "dao"]
    c = palette.colors(names)
    assert c["torch_ref"] == palette.PALETTE[0]
    assert c["dao"] == palette.PALETTE[palette.FIXED["dao"]]
    assert len(set(c.values())) == len(palette.PALETTE)  # distinct until the palette runs out
    more = palette.colors(names + ["one_more"])
    assert set(more.values()) == set(palette.PALETTE)  # then reused
    # the suite's implementations keep their colour whatever else is on the page
    assert palette.colors(["torch_ref", "zzz"])["torch_ref"] == \
        palette.colors(["aaa", "torch_ref", "cuda"])["torch_ref"]
    assert palette.colors(["my_port"]) == palette.colors(["my_port"])
    assert "#d62728" not in palette.PALETTE  # red means a failure on the page


def test_one_colour_per_implementation_across_chart_and_tables(gpu, perf):  # noqa: F811
    df = pd.concat([perf, with_dao(gpu)], ignore_index=True)
    report = render.build(df, perf)
    html = render.render(report)
    tree = Tree(html)
    seen: dict = {}
    for n in tree.root.iter():
        if n.attrs.get("class") == "swatch":
            impl = n.parent.attrs.get("data-impl") or n.parent.all_text().strip() or \
                n.up("data-impl")
            seen.setdefault(impl, set()).add(n.attrs["data-color"])
    for impl, colours in seen.items():
        if impl in report.colors:
            assert colours == {report.colors[impl]}, impl
    assert {"torch_ref", "torch_tiled", "dao"} <= set(seen)
    # the chart's points and legend use the same colours
    legend = re.findall(r'<circle cx="[\d.]+" cy="[\d.]+" r="4" fill="(#[0-9a-f]+)"/><text '
                        r'x="[\d.]+" y="[\d.]+">([a-z_]+)</text>', html)
    assert legend and all(report.colors[name] == colour for colour, name in legend)


# -- the baseline implementation per op ------------------------------------------------------

def two_ops(perf):  # noqa: F811
    """The perf run as causal_conv1d and again as a "softmax" with torch_ref (native),
    torch_fused_fp32 (reference) and liger (vendor)."""
    soft = []
    for impl, kind, scale in [("torch_ref", "native", 1.0), ("torch_fused_fp32", "reference", 0.8),
                              ("liger", "vendor", 0.5)]:
        d = perf[perf.impl == "torch_ref"].copy()
        d["op"], d["impl"], d["impl_kind"] = "softmax", impl, kind
        d["case_id"] = d["case_id"].str.replace("causal_conv1d/", "softmax/")
        d["time_median_s"] = d["time_median_s"] * scale
        d["time_samples_s"] = [s * scale for s in d["time_samples_s"]]
        soft.append(d)
    return pd.concat([perf] + soft, ignore_index=True)


def baselines(report):
    return {s.op: s.baseline for s in report.speedup}


def test_baseline_implementation_per_op(perf):  # noqa: F811
    df = two_ops(perf)
    # default: each op's yardstick, torch_ref, even where another is of kind reference
    assert baselines(render.build(df)) == {"causal_conv1d": "torch_ref", "softmax": "torch_ref"}
    r = render.build(df, options=render.Options(baseline_impl="causal_conv1d=torch_tiled,"
                                                              "softmax=liger"))
    assert baselines(r) == {"causal_conv1d": "torch_tiled", "softmax": "liger"}
    assert not [n for n in r.notices if "--baseline-impl" in n.text]
    # a bare name applies to every op that has it, silently skipping the others
    r = render.build(df, options=render.Options(baseline_impl="liger"))
    assert baselines(r) == {"causal_conv1d": "torch_ref", "softmax": "liger"}
    assert not [n for n in r.notices if "--baseline-impl" in n.text]
    r = render.build(df, options=render.Options(baseline_impl="torch_tiled,softmax=liger"))
    assert baselines(r) == {"causal_conv1d": "torch_tiled", "softmax": "liger"}
    soft = [s for s in r.speedup if s.op == "softmax"][0]
    liger = soft.impls.index("torch_ref")
    assert float(soft.geomean[liger].raw) == pytest.approx(0.5)  # liger time / torch_ref time
    tables = Tree(render.render(r)).find(lambda n: n.tag == "table" and "data-baseline" in n.attrs)
    assert {t.attrs["data-op"]: t.attrs["data-baseline"] for t in tables} == baselines(r)


def test_baseline_implementation_text_is_parsed():
    p = speedup.parse_baseline_impl("causal_conv1d=dao, softmax=liger")
    assert p.per_op == {"causal_conv1d": "dao", "softmax": "liger"} and p.bare is None
    p = speedup.parse_baseline_impl("torch_tiled,softmax=liger")
    assert p.bare == "torch_tiled" and p.wanted("layer_norm") == "torch_tiled"
    assert p.wanted("softmax") == "liger" and p.explicit("softmax")
    for bad in ("a,b", "softmax=", "=liger", "x=a,x=b", "a,,b"):
        with pytest.raises(ValueError):
            speedup.parse_baseline_impl(bad)


# -- layout: nothing wider than the page -----------------------------------------------------

def test_every_table_and_chart_scrolls_inside_its_own_box(perf, gpu):  # noqa: F811
    cur = with_failures(two_ops(perf), every=5)
    html = render.render(render.build(cur, two_ops(perf), render.Options(
        history=(("night", two_ops(perf).assign(run_id="n1", run_started="2026-01-01")),))))
    tree = Tree(html)
    wide = [n for n in tree.root.iter() if n.tag == "table"
            or (n.tag == "svg" and "chart" in n.attrs.get("class", ""))]
    assert len(wide) > 20
    for n in wide:
        p = n.parent
        while p is not None and "scroll" not in p.attrs.get("class", "").split():
            p = p.parent
        assert p is not None, (n.tag, n.attrs.get("class"))
    css = re.search(r"\.scroll \{([^}]*)\}", html).group(1)
    assert "overflow-x: auto" in css and "max-width: 100%" in css


# -- JSON ----------------------------------------------------------------------------------

def test_report_json_holds_the_reports_data(perf, gpu):  # noqa: F811
    cur = with_dao(gpu)
    report = render.build(cur, gpu)
    doc = json.loads(render.to_json(report))
    assert doc["format"] == "bwd-suite-report" and doc["version"] == 1
    for key in ("summary", "matrix", "failures", "known", "roofline", "changes", "speedup"):
        assert key in doc
    total = doc["summary"]["total"]
    assert total["items"] == len(cur) and total["expected"] == n_padding(cur)
    order = doc["summary"]["verdicts"]
    assert total["verdicts"][order.index("fail")] == n_padding(cur)
    assert doc["changes"]["gate_failed"] is False and doc["changes"]["n_known"] == n_padding(cur)
    ratio = doc["changes"]["ratios"]["rows"][0]
    assert isinstance(ratio["ratio"], float) and isinstance(ratio["p"], float)
    assert doc["known"]["n_total"] == n_padding(cur)
    assert doc["colors"]["torch_ref"] == palette.PALETTE[0]
    text = render.to_json(report)
    assert '"chart"' not in text and '"spark"' not in text  # geometry is not data
    perf_doc = json.loads(render.to_json(render.build(perf)))
    rows = perf_doc["roofline"][0]["rows"] + perf_doc["roofline"][0]["more_rows"]
    assert len(rows) == len(perf)
    for r in rows:
        want = perf[(perf.case_id == r["case_id"]) & (perf.impl == r["impl"])].iloc[0]
        assert r["median"] == want.time_median_s and r["bytes"] == want.bytes


def test_speedups_against_a_peer_with_known_failures_are_marked_not_dropped(perf):  # noqa: F811
    """Issue 40: with --baseline-impl cross_entropy=liger every ratio against Liger was
    struck out and the mean read "over 0 cases", Liger's loss being a declared known
    failure whose time is valid. Now it is shown, counted and marked; an undeclared
    failure is still struck out and left out."""
    df = two_ops(perf)
    liger = df.index[df["impl"] == "liger"]
    df.loc[liger, ["verdict", "failure_kind", "reason", "known_failure"]] = [
        "fail", "mismatch", "loss off in its last bit", "the loss is computed in bf16"]
    wrong = df.index[(df["op"] == "softmax") & (df["impl"] == "torch_ref")][0]
    df.loc[wrong, ["verdict", "failure_kind", "reason"]] = ["fail", "mismatch", "dx wrong"]
    n = len(liger)
    report = render.build(df, options=render.Options(baseline_impl="softmax=liger"))
    soft = [s for s in report.speedup if s.op == "softmax"][0]
    assert soft.baseline == "liger"
    ref, fused = soft.impls.index("torch_ref"), soft.impls.index("torch_fused_fp32")
    assert (int(soft.n_cases[ref].raw), soft.n_known[ref]) == (n - 1, n - 1)
    assert (int(soft.n_cases[fused].raw), soft.n_known[fused]) == (n, n)
    assert float(soft.geomean[ref].raw) == pytest.approx(0.5)  # liger time / torch_ref time
    cells = [row.cells[ref] for row in soft.rows]
    assert sum(not c.valid for c in cells) == 1 and all(c.known for c in cells if c.valid)
    assert not any(row.cells[soft.impls.index("liger")].known for row in soft.rows)

    table = [t for t in Tree(render.render(report)).root.iter()
             if t.tag == "table" and t.attrs.get("data-op") == "softmax"
             and "data-baseline" in t.attrs][0]
    speeds = [x for x in table.iter() if x.attrs.get("data-k") == "speedup:torch_ref"]
    marked = [x for x in speeds if "known" in x.attrs["class"].split()]
    struck = [x for x in speeds if "invalid" in x.attrs["class"].split()]
    assert (len(marked), len(struck)) == (n - 1, 1)
    assert all(x.all_text().endswith(speedup.KNOWN_MARK) for x in marked)
    foot = [x for x in table.iter() if "data-n" in x.attrs]
    want = {"torch_ref": f"over {n - 1} cases ({n - 1} †)",
            "torch_fused_fp32": f"over {n} cases ({n} †)"}
    assert [x.all_text() for x in foot] == [want[i] for i in soft.impls if i != "liger"]
