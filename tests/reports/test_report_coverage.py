"""The report's Coverage section (reports/coverage.py, _coverage.html.j2): it renders per
implementation the parameters it did not fully run and its missing value pairs, lists a
declared unsupported pair, and stays capped on a big run."""

import json

import pandas as pd
import pytest

from bwd_suite.reports import coverage, render
from tests.reports.test_report import Tree, gpu  # noqa: F401

NO_CF_STATES = "channel-first takes no initial states"
TOO_LONG = "sequences up to 2048 only"


def why_not(params_json: str):
    p = json.loads(params_json)
    if p["layout"] == "channel_first" and p["initial_states"]:
        return NO_CF_STATES
    if p["seqlen"] > 2048:
        return TOO_LONG
    return None


@pytest.fixture(scope="module")
def with_port(gpu) -> pd.DataFrame:  # noqa: F811
    """The gpu run plus an implementation `port` of the same cases that declares
    channel-first with initial states, and sequences beyond 2048, unsupported."""
    port = gpu.copy()
    port["impl"], port["impl_kind"] = "port", "ours"
    reasons = [why_not(p) for p in port["params_json"]]
    port["verdict"] = ["unsupported" if r else "pass" for r in reasons]
    port["reason"] = [r or "" for r in reasons]
    return pd.concat([gpu, port], ignore_index=True)


@pytest.fixture(scope="module")
def report(with_port):
    return render.build(with_port)


@pytest.fixture(scope="module")
def tree(report):
    return Tree(render.render(report))


def section(tree):
    return [n for n in tree.root.iter() if n.attrs.get("id") == "coverage"][0]


def test_section_renders_with_a_row_per_implementation(report, tree, gpu):  # noqa: F811
    cov = report.coverage
    assert [(x.op, x.impl) for x in cov.impls] == [("causal_conv1d", "port"),
                                                  ("causal_conv1d", "torch_ref")]
    assert tree.find(lambda n: n.tag == "a" and n.attrs.get("href") == "#coverage")
    sec = section(tree)
    assert "Coverage" in sec.all_text()
    rows = {n.attrs["data-impl"]: n for n in sec.iter() if n.tag == "tr"
            and "data-impl" in n.attrs}
    assert set(rows) == {"port", "torch_ref"}
    ref = {n.attrs["data-k"]: n.attrs["data-v"] for n in rows["torch_ref"].iter()
           if "data-k" in n.attrs}
    assert ref["ran"] == "968" and ref["params_full"] == ref["params"]
    assert ref["pairs_ran"] == ref["offered"] and ref["unsupported"] == "0"
    port = {n.attrs["data-k"]: n.attrs["data-v"] for n in rows["port"].iter()
            if "data-k" in n.attrs}
    n_unsupported = sum(why_not(p) is not None for p in gpu["params_json"])
    assert port["ran"] == str(968 - n_unsupported)
    assert int(port["unsupported"]) > 0


def test_section_lists_the_declared_unsupported_pair(tree):
    box = [n for n in section(tree).iter() if n.tag == "details"
           and n.attrs.get("data-impl") == "port"][0]
    table = [n for n in box.iter() if n.tag == "table"
             and n.attrs.get("data-category") == "unsupported"][0]
    listed = {(n.attrs["data-a"], n.attrs["data-b"]): n for n in table.iter()
              if n.tag == "tr" and "data-a" in n.attrs}
    row = listed[("layout=channel_first", "initial_states=true")]
    assert NO_CF_STATES in row.all_text()
    items = [n for n in row.iter() if n.attrs.get("data-k") == "items"][0]
    assert items.attrs["data-v"] == "369"  # every channel-first case with initial states
    # the values it never ran, with the declared reason, under its parameters
    params = [n for n in box.iter() if n.tag == "tr" and n.attrs.get("data-param") == "seqlen"]
    assert params and TOO_LONG in params[0].all_text()
    # torch_ref ran every value: no parameter table, no unsupported list
    ref = [n for n in section(tree).iter() if n.tag == "details"
           and n.attrs.get("data-impl") == "torch_ref"][0]
    assert not [n for n in ref.iter() if n.attrs.get("data-param")]
    assert not [n for n in ref.iter() if n.attrs.get("data-category") == "unsupported"]


def test_section_stays_capped(report, tree):
    cov = report.coverage
    port = [x for x in cov.impls if x.impl == "port"][0]
    seqlen = [p for p in port.params if p.param == "seqlen"][0]
    n_long = int(seqlen.n_offered.raw) - int(seqlen.n_ran.raw)
    assert n_long > coverage.MAX_VALUES
    assert sum(len(v.split(", ")) for v, _ in seqlen.missing) == coverage.MAX_VALUES
    assert seqlen.n_hidden == n_long - coverage.MAX_VALUES
    gaps = [x for x in port.listings if x.category == "never together"][0]
    assert gaps.n_total == port.counts.never_together > coverage.MAX_PAIRS
    assert len(gaps.rows) == coverage.MAX_PAIRS
    for table in (n for n in section(tree).iter() if n.tag == "table"
                  and "data-category" in n.attrs):
        listed = [n for n in table.iter() if n.tag == "tr" and "data-a" in n.attrs]
        assert len(listed) <= coverage.MAX_PAIRS
        hidden = int(table.attrs["data-n"]) - len(listed)
        more = [n for n in table.iter() if n.tag == "tr" and n.attrs.get("class") == "more"]
        assert (hidden == 0 and not more) or f"and {hidden:,} more" in more[0].all_text()
    html = render.render(report)
    start = html.index('<section id="coverage">')
    size = html.index("</section>", start) - start
    assert size < 40_000, size  # thousands of pairs, a few kB per implementation


def test_coverage_is_in_the_json_report(report):
    doc = json.loads(render.to_json(report))
    impls = {c["impl"]: c for c in doc["coverage"]["impls"]}
    assert impls["port"]["counts"]["unsupported_pair"] >= 1
    assert impls["torch_ref"]["counts"]["unsupported"] == 0


def test_results_without_params_render_a_note():
    df = pd.DataFrame({"op": ["softmax"], "impl": ["torch_ref"], "verdict": ["pass"]})
    assert coverage.build(df).impls == ()
