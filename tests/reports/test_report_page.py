"""The page as a reader meets it (issue 40): the gate's verdict first, in one line with
its counts and the worst items named; the run's identity in one line; sources and notices
below.
"""

import html as htmllib
import re

import pandas as pd

from bwd_suite.reports import render
from bwd_suite.suite.regression import Rule
from tests.reports.test_report import Tree, perf, with_failures  # noqa: F401  (fixture)


def planted(perf):  # noqa: F811
    """The perf run with case 4 slowed x1.3 and case 7 failing: one regression and one new
    failure against perf itself."""
    cur = perf.copy().reset_index(drop=True)
    cur.loc[4, "time_median_s"] *= 1.3
    cur.at[4, "time_samples_s"] = cur.at[4, "time_samples_s"] * 1.3
    cur.loc[7, ["verdict", "failure_kind", "reason"]] = ["fail", "mismatch", "planted"]
    return cur


def gate_of(html):
    tree = Tree(html)
    gate = [n for n in tree.root.iter() if n.attrs.get("id") == "gate"]
    assert len(gate) == 1
    counts = {n.attrs["data-k"]: int(n.attrs["data-v"]) for n in gate[0].iter()
              if "data-k" in n.attrs}
    return tree, gate[0], counts


def text_of(html, marker) -> str:
    """The text of the element that `marker` starts (`id="gate"`), tags stripped, in order
    (Tree.all_text does not keep the order of text around child elements)."""
    start = html.rindex("<", 0, html.index(marker))
    tag = re.match(r"<(\w+)", html[start:]).group(1)
    end = html.index(f"</{tag}>", start)
    return " ".join(htmllib.unescape(re.sub(r"<[^>]+>", "", html[start:end])).split())


def body_order(html) -> list:
    """The ids and classes of the body's first elements, in order."""
    body = html[html.index("<body>"):]
    out = []
    for marker in ('id="gate"', "<h1>", 'class="identity"', "<nav>", 'class="notice',
                   'class="meta"', 'id="summary"'):
        if marker in body:
            out.append((body.index(marker), marker))
    return [m for _, m in sorted(out)]


def test_gate_line_counts_the_changes_and_names_the_worst(perf):  # noqa: F811
    cur = planted(perf)
    report = render.build(cur, perf, render.Options(rule=Rule()))
    g = report.headline.gate
    assert (g.tone, g.verdict) == ("bad", "Regressed")
    html = render.render(report)
    tree, gate, counts = gate_of(html)
    assert gate.attrs["data-gate"] == "bad"
    assert counts == {"regressions": 1, "new-failures": 1, "unexpected-passes": 0,
                      "improvements": 0, "known-failures": 0}
    text = text_of(html, 'id="gate"')
    assert "Regressed · 1 regression · 1 new failure · 0 unexpected passes" in text
    assert f"{cur.case_id[4]} [{cur.impl[4]}] ×1.3" in text
    assert f"{cur.case_id[7]} [{cur.impl[7]}] fail" in text
    # every link of the line leads somewhere on the page
    ids = {n.attrs["id"] for n in tree.root.iter() if "id" in n.attrs}
    hrefs = [n.attrs["href"] for n in gate.iter() if n.tag == "a"]
    assert len(hrefs) == 4 and {h[1:] for h in hrefs} <= ids
    # above everything else, the identity under it; the sources and notices below
    assert body_order(html) == ['id="gate"', "<h1>", 'class="identity"', "<nav>",
                                'class="meta"', 'id="summary"']


def test_gate_line_of_a_run_without_baseline_counts_its_failures(perf):  # noqa: F811
    df = with_failures(perf, every=5)
    df.loc[5, "known_failure"] = "declared: fails on purpose"  # a failing row, declared
    report = render.build(df)
    g = report.headline.gate
    assert (g.tone, g.verdict) == ("bad", "Failed")
    n_fail = int((df.verdict == "fail").sum())
    html = render.render(report)
    tree, gate, counts = gate_of(html)
    assert counts == {"failures": n_fail - 1, "unexpected-passes": 0, "known-failures": 1}
    assert "no baseline given" in text_of(html, 'id="gate"')
    assert len(g.worst) == 3 and all(w.href.startswith("#f") for w in g.worst)
    ids = {n.attrs["id"] for n in tree.root.iter() if "id" in n.attrs}
    assert {w.href[1:] for w in g.worst} <= ids
    # a run that passes says so, in green
    ok = render.build(perf).headline.gate
    assert (ok.tone, ok.verdict, ok.worst) == ("ok", "Passed", ())


def test_identity_line_names_commit_device_and_profile(perf):  # noqa: F811
    base = perf.assign(git_commit="0123456789ab", profile="gpu")
    report = render.build(pd.concat([perf, perf.assign(run_id="second")]), base)
    fields = dict(report.headline.identity.fields)
    assert fields["commit"] == perf.git_commit.iloc[0]
    assert fields["device"] == "NVIDIA H200" and fields["profile"] == "perf"
    assert fields["items"] == f"{len(perf)} from 2 runs"  # the later run's rows are used
    assert dict(report.headline.identity.baseline) == {
        "commit": "0123456789ab", "device": "NVIDIA H200", "profile": "gpu",
        "items": f"{len(perf)}"}
    text = text_of(render.render(report), 'class="identity"')
    assert text.startswith(f"commit {perf.git_commit.iloc[0]} · device NVIDIA H200 · "
                           f"profile perf · items {len(perf)} from 2 runs")
    assert "baseline commit 0123456789ab" in text


def test_long_sections_start_folded_and_the_navigation_counts(perf):  # noqa: F811
    df = with_failures(perf)
    report = render.build(df)
    html = render.render(report)
    tree = Tree(html)
    folds = {n.attrs["id"][5:]: "open" in n.attrs for n in tree.root.iter()
             if n.tag == "details" and "fold" in n.attrs.get("class", "").split()}
    assert list(folds) == ["summary", "changes", "matrix", "failures", "known-failures",
                           "coverage", "roofline", "memory-ledger", "steps", "side-by-side",
                           "details"]
    # 38 roofline rows and two charts, 38 detail rows in sweeps: long, folded; the
    # summary and the changes always open; an empty section is short
    assert folds["summary"] and folds["changes"] and folds["known-failures"]
    assert not folds["roofline"] and not folds["details"]
    # each fold's section inside it, and the navigation's count of each
    for sid in folds:
        fold = [n for n in tree.root.iter() if n.attrs.get("id") == "fold-" + sid][0]
        assert [n for n in fold.iter() if n.tag == "section" and n.attrs.get("id") == sid]
    nav = {n.attrs["href"][1:]: n for n in tree.find(lambda n: n.tag == "a" and
                                                      n.parent.tag == "nav")}
    assert list(nav) == list(folds)
    count = {k: [c.all_text() for c in n.children if c.attrs.get("class") == "n"] for k, n
             in nav.items()}
    n_fail = int((df.verdict == "fail").sum())
    assert count["failures"] == [str(n_fail)] and count["summary"] == [str(len(df))]
    assert count["roofline"] == [str(len(df))] and count["changes"] == ["no baseline"]


def test_shown_rows_leave_out_what_starts_folded():
    from bwd_suite.reports.sections import CHART_ROWS, shown_rows

    html = ('<table><tr><td>1</td></tr></table><details class="group"><table><tr></tr>'
            '<tr></tr></table><details open><tr></tr></details></details>'
            '<details class="group" open><tr><td>2</td></tr><svg class="chart"></svg>'
            '</details>')
    assert shown_rows(html) == 2 + CHART_ROWS


def test_page_reads_without_its_script(perf):  # noqa: F811
    """Scripts off: the filter bar stays hidden (it needs the script), every fold opens by
    hand (a summary of its own), every row is in the page; the script comes last."""
    html = render.render(render.build(with_failures(perf), perf))
    tree = Tree(html)
    form = [n for n in tree.root.iter() if n.attrs.get("id") == "filters"]
    assert len(form) == 1 and "hidden" in form[0].attrs
    folds = [n for n in tree.root.iter() if n.tag == "details"]
    assert len(folds) > 10
    assert all(n.children and n.children[0].tag == "summary" for n in folds)
    assert not [n for n in tree.root.iter() if "hidden" in n.attrs and n is not form[0]]
    assert html.index("<script>") > html.index('id="details"')
