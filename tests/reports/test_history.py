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


# -- issue 40: the order, known failures, ratios, the time axis, bad files -------------------

def planted_nights(perf, plants, n=8, commits=None):  # noqa: F811
    """(name, frame) per night, each row scaled by plants: {row: (factor, from night,
    extra columns)}; night k's commit is commits[k] (default c0000k)."""
    out = []
    for k in range(n):
        d = perf.copy()
        d["run_id"] = f"n{k}"
        d["run_started"] = f"2026-12-{k + 1:02d}T02:00:00+00:00"
        d["git_commit"] = commits[k] if commits else f"c0000{k}"
        for row, (factor, start, cols) in plants.items():
            if k >= start:
                d.loc[row, "time_median_s"] *= factor
                d.at[row, "time_samples_s"] = d.at[row, "time_samples_s"] * factor
                for col, v in cols.items():
                    d.loc[row, col] = v
        out.append((f"{k}.parquet", d))
    return out


def test_a_real_slowdown_sorts_above_cpu_noise(perf):  # noqa: F811
    """A x2.5 slowdown four quiet nights agree on comes before a x3 jump of the last night
    alone (less significant: fewer samples after it) and one of a loaded CPU night (its
    timing is noise by the comparison's host-load limit), though both are more recent
    and bigger."""
    cpu = {"timing_method": "perf_counter"}
    runs = planted_nights(perf, {0: (2.5, 4, {}), 1: (3.0, 7, {"host_load": 0.9, **cpu}),
                                 2: (3.0, 7, {})})
    for _, d in runs:  # row 1 is a CPU item every night, loaded on the last
        d.loc[1, "timing_method"] = "perf_counter"
    h = history.build(runs, Rule())
    assert [(t.case_id, t.impl) for t in h.changed] == [
        (perf.case_id[r], perf.impl[r]) for r in (0, 2, 1)]
    real, jump, loaded = h.changed
    assert real.steps[0].run == 4 and jump.steps[0].run == loaded.steps[0].run == 7
    # the weights are the size of the step times its significance, noise weighing nothing
    assert real.weight > jump.weight > loaded.weight == 0
    assert float(jump.steps[0].p.raw) > float(real.steps[0].p.raw)
    assert loaded.steps[0].noise == "host load 0.9" and loaded.rank == 2
    html = render.render(render.build(runs[-1][1], options=render.Options(
        history=tuple(runs[:-1]))))
    rows = [n for n in Tree(html).find(lambda n: n.tag == "tr" and "data-rank" in n.attrs)]
    assert [n.attrs["data-case"] for n in rows[:3]] == [perf.case_id[r] for r in (0, 2, 1)]
    assert "noise: host load 0.9" in html


def test_known_failures_are_shown_as_expected_and_new_failures_first(perf):  # noqa: F811
    declared = {"verdict": "fail", "known_failure": "documented padding behaviour"}
    runs = planted_nights(perf, {3: (1.0, 5, declared), 4: (1.0, 6, {"verdict": "fail"}),
                                 0: (2.5, 4, {})})
    h = history.build(runs, Rule())
    new, slowed, known = h.changed  # the gate's failure, the step, the expected one
    assert (new.case_id, new.rank, new.expected) == (perf.case_id[4], 0, False)
    assert (slowed.case_id, slowed.rank) == (perf.case_id[0], 1)
    assert (known.case_id, known.rank, known.expected) == (perf.case_id[3], 2, True)
    (v,) = known.verdict_changes
    assert (v.before, v.after, v.gate) == ("pass", "fail (expected)", False)
    assert known.spark.dots[-1].color == history.KNOWN_COLOR
    assert "(expected)" in known.spark.dots[-1].title
    html = render.render(render.build(runs[-1][1], options=render.Options(
        history=tuple(runs[:-1]))))
    row = Tree(html).find(lambda n: n.tag == "tr" and n.attrs.get("data-case") == known.case_id
                          and n.up("id") == "history")[0]
    cells = [c for c in row.children if c.tag == "td"]
    verdict_cell = cells[5]
    assert verdict_cell.all_text() == "fail (expected)"
    assert not any("v-fail" in n.attrs.get("class", "") for n in verdict_cell.iter())
    new_row = Tree(html).find(lambda n: n.tag == "tr" and n.attrs.get("data-case") == new.case_id
                              and n.up("id") == "history")[0]
    assert any("v-fail" in n.attrs.get("class", "") for n in new_row.iter())


def test_step_ratios_are_plain_numbers(perf):  # noqa: F811
    h = history.build(planted_nights(perf, {0: (2880.0, 4, {}), 1: (1 / 2880, 4, {}),
                                            2: (1.4, 4, {})}), Rule())
    ratios = {(t.case_id, t.impl): t.steps[0].ratio.text for t in h.changed}
    assert [ratios[(perf.case_id[r], perf.impl[r])] for r in range(3)] == [
        "×2,880", "×0.000347", "×1.4"]
    html = render.render(render.build(perf, options=render.Options(history=tuple(
        planted_nights(perf, {0: (2880.0, 4, {})})))))
    sec = html[html.index('<section id="history">'):]
    sec = sec[:sec.index("</section>")]
    assert "×2,880 slower" in sec and "e+" not in sec and "e-0" not in sec


def test_trends_have_a_time_axis_commits_on_hover_and_steps_by_commit_range(perf):  # noqa: F811
    runs = planted_nights(perf, {0: (1.5, 4, {})}, n=6,
                          commits=["aaa1", "aaa1", "bbb2", "ccc3", "ddd4", "ddd4"])
    # irregular nights: the third came a week after the second
    for k, (_, d) in enumerate(runs):
        d["run_started"] = f"2026-12-{[1, 2, 9, 10, 11, 12][k]:02d}T02:00:00+00:00"
    h = history.build(runs, Rule())
    (t,) = h.changed
    (step,) = t.steps
    assert (step.prev_run, step.run, step.commits) == (3, 4, "ccc3..ddd4")
    xs = [d.x for d in t.spark.dots]
    day = (xs[-1] - xs[0]) / 11
    assert xs[2] - xs[1] == pytest.approx(7 * day, abs=0.2)  # placed by time, not by index
    assert [tk.text for tk in t.spark.ticks] == ["2026-12-01", "2026-12-12"]
    assert len(t.spark.scale) == 2 and all(lbl.text.endswith("s") for lbl in t.spark.scale)
    assert "commit bbb2" in t.spark.dots[2].title and "2026-12-09" in t.spark.dots[2].title
    (mark,) = t.spark.marks
    assert "commits ccc3..ddd4" in mark.title and xs[3] < mark.x < xs[4]
    # the same commit on both sides: the step came from elsewhere, and the page says so
    same = history.commit_range(h.runs[0], h.runs[1])
    assert same == "aaa1 (the same commit: no code change)"
    html = render.render(render.build(runs[-1][1], options=render.Options(
        history=tuple(runs[:-1]))))
    assert '<code class="commits">ccc3..ddd4</code>' in html
    assert "<title>2026-12-09 02:00, commit bbb2: pass, " in html


def test_a_bad_file_in_the_history_folder_or_the_inputs_is_skipped_with_a_notice(
        perf, tmp_path, capsys):  # noqa: F811
    folder = tmp_path / "nightly"
    folder.mkdir()
    runs = planted_nights(perf, {0: (1.5, 3, {})}, n=5)
    for name, df in runs[:-1]:
        write(df, folder / name)
    whole = (folder / "0.parquet").read_bytes()
    (folder / "2.parquet").write_bytes(whole[:len(whole) // 2])  # truncated
    pd.DataFrame({"a": [1, 2]}).to_parquet(folder / "pandas.parquet")  # not a results file
    results = tmp_path / "results"
    results.mkdir()
    write(runs[-1][1], results / "tonight.parquet")
    pd.DataFrame({"a": [1]}).to_parquet(results / "notes.parquet")
    out = tmp_path / "r.html"
    assert main(["report", str(results), "--history", str(folder), "-o", str(out)]) == 0
    html = out.read_text()
    assert "4 runs in order of start" in html  # three good nights and tonight
    notices = [n.all_text() for n in Tree(html).find(
        lambda n: "notice" in n.attrs.get("class", "").split())]
    for name, why in [("2.parquet", "not a readable parquet file"),
                      ("pandas.parquet", "not a bwd-suite results file"),
                      ("notes.parquet", "not a bwd-suite results file")]:
        (text,) = [t for t in notices if name in t]
        assert why in text and text.startswith("Skipped ")
    err = capsys.readouterr().err
    assert err.count("report: Skipped ") == 3
    # a baseline of which nothing can be read: the page without a comparison, and why
    assert main(["report", str(results), "--baseline", str(folder / "pandas.parquet"), "-o",
                 str(out)]) == 0
    assert "pandas.parquet of the baseline: not a bwd-suite results file" in out.read_text()
    assert "no baseline file could be read" in capsys.readouterr().err
    # only files that cannot be read: none at all is still bad input, in one line
    assert main(["report", str(results / "notes.parquet"), "-o", str(out)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "notes.parquet" in line and "not a bwd-suite results file" in line
