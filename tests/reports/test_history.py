"""`report --history DIR`: nightly runs built from the stored H200 perf run (run-to-run
noise within the factor), with a planted slowdown from one night on and a planted
failure; the steps are found where they were planted and nowhere else, the most recent
change comes first, and the page draws each trend as inline SVG."""

import random

import pandas as pd
import pytest

from bwd_suite.reports import history, render
from bwd_suite.cli import main
from bwd_suite.suite.regression import Rule
from tests.reports.test_report import Tree, perf, without_page_script  # noqa: F401  (fixture)
from tests.reports.test_report_cli import write

N_NIGHTS = 10
SLOW_ROW, SLOW_FROM = 6, 6  # this item is 1.4x slower from night 6 on
FAIL_ROW, FAIL_FROM = 11, 8  # this one fails from night 8 on


def nights(perf, n=N_NIGHTS, seed=0):  # noqa: F811
    """(name, frame) per night; names sort in reverse, so only run_started orders them."""
    rng = random.Random(seed)
    out = []
    for k in range(n):
        d = perf.copy()
        f = [1 + rng.gauss(0, 0.015) for _ in range(len(d))]
        if k >= SLOW_FROM:
            f[SLOW_ROW] *= 1.4
        d["time_median_s"] = d["time_median_s"] * f
        d["time_samples_s"] = [s * x for s, x in zip(d["time_samples_s"], f)]
        d["run_id"] = f"night{k:02d}"
        d["run_started"] = f"2026-12-{k + 1:02d}T02:00:00+00:00"
        if k >= FAIL_FROM:
            d.loc[FAIL_ROW, ["verdict", "failure_kind", "reason"]] = ["fail", "mismatch", "x"]
        out.append((f"z{n - k:02d}.parquet", d))
    return out


def test_steps_are_found_where_planted_and_nowhere_else(perf):  # noqa: F811
    runs = nights(perf)
    h = history.build(runs[::-1], Rule())  # any order in: run_started orders them
    assert [r.started[:10] for r in h.runs] == [f"2026-12-{k + 1:02d}" for k in range(N_NIGHTS)]
    assert h.n_items == len(perf) and h.n_changed == 2
    assert h.n_steps == 1 and h.n_verdict_changes == 1
    failed, slowed = h.changed  # the most recent change first
    assert (failed.case_id, failed.impl) == (perf.case_id[FAIL_ROW], perf.impl[FAIL_ROW])
    assert [(v.run, v.before, v.after) for v in failed.verdict_changes] == [
        (FAIL_FROM, "pass", "fail")]
    assert (slowed.case_id, slowed.impl) == (perf.case_id[SLOW_ROW], perf.impl[SLOW_ROW])
    (step,) = slowed.steps
    assert step.run == SLOW_FROM and step.slower
    assert float(step.ratio.raw) == pytest.approx(1.4, rel=0.03)
    assert float(step.p.raw) < 1e-10
    assert slowed.last_change == SLOW_FROM and "slower" in slowed.last_text
    assert len(h.unchanged) == len(perf) - 2 and not h.n_unchanged_hidden
    assert all(t.spark is not None and len(t.spark.dots) == N_NIGHTS for t in h.changed)
    marks = [m.kind for m in slowed.spark.marks]
    assert marks == ["slower"] and [m.kind for m in failed.spark.marks] == ["verdict"]


def test_timings_of_another_flush_are_left_out_of_the_trend(perf):  # noqa: F811
    runs = nights(perf)
    name, first = runs[0]
    runs[0] = (name, first.assign(l2_flush="clean", time_median_s=first.time_median_s * 3,
                                  time_samples_s=[s * 3 for s in first.time_samples_s]))
    h = history.build(runs, Rule())
    assert h.n_steps == 1  # the 3x of another flush is no step
    t = [t for t in h.changed if t.steps][0]
    assert t.n_timed == N_NIGHTS - 1 and t.n_runs == N_NIGHTS
    assert sum(not d.timed for d in t.spark.dots) == 1


def test_history_section_in_the_page(perf, tmp_path):  # noqa: F811
    runs = nights(perf)
    tonight = runs[-1][1]
    report = render.build(tonight, options=render.Options(history=tuple(runs[:-1])))
    assert len(report.history.runs) == N_NIGHTS  # tonight's results are the last run
    html = render.render(report)
    assert '<section id="history">' in html and '<svg class="spark"' in html
    assert "<script" not in without_page_script(html).lower()  # only the page's own
    tree = Tree(html)
    sec = [n for n in tree.root.iter() if n.attrs.get("id") == "history"][0]
    rows = [n for n in sec.iter() if n.tag == "tr" and "data-case" in n.attrs]
    assert len(rows) == len(perf)
    assert rows[0].attrs["data-verdict-changes"] == str(FAIL_FROM)
    assert rows[1].attrs["data-steps"] == str(SLOW_FROM)
    assert {r.attrs["data-steps"] for r in rows[2:]} == {""}
    # tonight inside the folder already: not added twice
    again = render.build(tonight, options=render.Options(history=tuple(runs)))
    assert len(again.history.runs) == N_NIGHTS


def test_report_history_command(perf, tmp_path):  # noqa: F811
    folder = tmp_path / "nightly"
    folder.mkdir()
    for k, (name, df) in enumerate(nights(perf, n=6)):
        if k % 2:  # a night may be a folder of results files
            (folder / name).mkdir()
            write(df.iloc[:20], folder / name / "a.parquet")
            write(df.iloc[20:], folder / name / "b.parquet")
        else:
            write(df, folder / name)
    (folder / "README.txt").write_text("not a run")
    out = tmp_path / "r.html"
    tonight = write(nights(perf, n=7)[-1][1], tmp_path / "tonight.parquet")
    assert main(["report", str(tonight), "--history", str(folder), "-o", str(out)]) == 0
    html = out.read_text()
    assert "7 runs in order of start" in html and 'class="spark"' in html
    assert main(["report", str(tonight), "--history", str(tmp_path / "none"), "-o",
                 str(out)]) == 2
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["report", str(tonight), "--history", str(empty), "-o", str(out)]) == 2


def test_big_history_stays_listable(perf):  # noqa: F811
    """Many items over many nights: every change is counted, the listing is capped."""
    src = pd.concat([perf.assign(case_id=perf.case_id + f"-r{k}") for k in range(20)],
                    ignore_index=True)
    h = history.build(nights(src, n=12), Rule())
    assert h.n_items == len(src) == 760
    assert len(h.changed) + len(h.unchanged) <= history.LIST_BUDGET
    assert h.n_changed == 2  # the planted rows of the first copy only
