"""`python -m bwd_suite report` and `python -m bwd_suite compare`: files written, exit codes for CI
gating (1 on a regression or a new failure), and one-line errors on bad input."""

import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bwd_suite.suite import results
from bwd_suite.cli import main
from bwd_suite.suite.results import read_results
from tests.reports.test_report import GPU, PERF, XSS, without_page_script


def write(df, path, version=None):
    """Write a results frame back with the suite's schema (another version on request)."""
    table = pa.Table.from_pandas(df, schema=results.SCHEMA, preserve_index=False)
    if version is not None:
        table = table.replace_schema_metadata({b"bwd_suite_schema_version": str(version).encode()})
    pq.write_table(table, path)
    return path


def planted(tmp_path, factor=1.3, row=4):
    """A copy of the perf run with one item's samples and median scaled by `factor`."""
    df = read_results([PERF])
    df.loc[row, "time_median_s"] *= factor
    df.at[row, "time_samples_s"] = df.at[row, "time_samples_s"] * factor
    return write(df, tmp_path / "planted.parquet"), df.case_id[row], df.impl[row]


def one_line_error(capsys, *needles):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("error: ") and "Traceback" not in err[0]
    for n in needles:
        assert n in err[0], (n, err[0])


# -- report --------------------------------------------------------------------------------

def test_report_writes_one_html_file(tmp_path, capsys):
    out = tmp_path / "sub" / "r.html"
    assert main(["report", str(PERF), str(GPU), "--output", str(out)]) == 0
    html = out.read_text()
    assert html.startswith("<!doctype html>") and 'class="matrix"' in html
    assert 'class="roofline"' in html and str(PERF) in html
    err = capsys.readouterr().err
    assert "report:" in err and "1006 rows" in err


def test_report_against_a_planted_regression(tmp_path):
    path, case, impl = planted(tmp_path)
    out = tmp_path / "r.html"
    assert main(["report", str(path), "--baseline", str(PERF), "-o", str(out)]) == 0
    html = out.read_text()
    assert "Regressed" in html and f'data-case="{case}" data-impl="{impl}"' in html


@pytest.mark.parametrize("argv, needles", [
    (["report", "missing.parquet"], ["missing.parquet", "no such results file"]),
    (["report", str(PERF), "--baseline", "gone.parquet"], ["gone.parquet"]),
    (["report", str(PERF), "--baseline-impl", "nope"], ["--baseline-impl", "nope", "torch_ref"]),
    (["report", str(PERF), "--max-cases", "0"], ["--max-cases"]),
    (["report", str(PERF), "--factor", "0.5"], ["--factor"]),
    (["report", str(PERF), "--alpha", "2"], ["--alpha"]),
])
def test_report_bad_input_is_one_line(argv, needles, capsys, tmp_path):
    assert main(argv + ["--output", str(tmp_path / "r.html")]) == 2
    one_line_error(capsys, *needles)
    assert not (tmp_path / "r.html").exists()


def test_other_schema_version_and_unreadable_files_are_refused(tmp_path, capsys):
    newer = write(read_results([PERF]), tmp_path / "v99.parquet", version=99)
    assert main(["report", str(newer), "-o", str(tmp_path / "r.html")]) == 2
    one_line_error(capsys, "v99.parquet", "schema version 99")
    junk = tmp_path / "junk.parquet"
    junk.write_text("not parquet")
    assert main(["compare", str(junk), str(PERF)]) == 2
    one_line_error(capsys, "junk.parquet", "not a readable parquet file")
    empty = write(read_results([PERF]).iloc[:0], tmp_path / "empty.parquet")
    assert main(["report", str(empty), "-o", str(tmp_path / "r.html")]) == 2
    one_line_error(capsys, "holds no result rows")


def test_report_escapes_what_comes_from_the_file(tmp_path):
    df = read_results([PERF])
    df.loc[0, "case_id"] = XSS
    path = write(df, tmp_path / "xss.parquet")
    out = tmp_path / "r.html"
    assert main(["report", str(path), "-o", str(out)]) == 0
    assert "<script" not in without_page_script(out.read_text())


# -- compare -------------------------------------------------------------------------------

def test_compare_catches_a_planted_regression(tmp_path, capsys):
    path, case, impl = planted(tmp_path)
    assert main(["compare", str(PERF), str(path)]) == 1
    out = capsys.readouterr().out
    assert "REGRESSIONS (1):" in out and case in out and f"[{impl}]" in out
    assert "result: REGRESSED" in out


def test_compare_and_report_skip_timings_after_another_flush(tmp_path, capsys):
    path, case, impl = planted(tmp_path)
    df = read_results([path])
    assert set(df["l2_flush"].dropna()) == {"dirty"}  # an old file: its flush zeroed
    df["l2_flush"] = df["l2_flush"].where(df["l2_flush"].isna(), "clean")
    timed = int(df["l2_flush"].notna().sum())
    other = write(df, tmp_path / "clean.parquet")
    # the planted slowdown is not read; and as no timed item is left to compare, the gate
    # says so with exit 3 instead of passing (issue 24: it was 0, "result: ok")
    assert main(["compare", str(PERF), str(other)]) == 3
    out = capsys.readouterr().out
    assert f"not compared: {timed} items timed in both runs after different L2 flushes" in out
    assert "\nno verdict moved (no timing compared): no new failures" in out
    assert "l2_flush: " in out
    assert "compared timings: none: of the" in out
    assert out.strip().splitlines()[-1] == (
        f"result: NOT COMPARED (exit 3): no timed item could be compared: of the {timed} "
        f"items timed in both runs, {timed} after different L2 flushes (dirty -> clean): "
        f"timings are compared on one device after one kind of flush only")
    html = tmp_path / "r.html"
    assert main(["report", str(other), "--baseline", str(PERF), "--output", str(html)]) == 0
    assert f"{timed} items were timed after another kind of L2 flush" in html.read_text()


def test_compare_of_identical_runs_passes(tmp_path, capsys):
    copy = shutil.copy(PERF, tmp_path / "copy.parquet")
    assert main(["compare", str(PERF), str(copy)]) == 0
    out = capsys.readouterr().out
    assert "REGRESSIONS" not in out and "result: ok" in out
    assert "\nnothing moved: no regressions, new failures" in out  # said, not ten empty headers
    assert "compared timings (38, flagged ones first" in out  # the table, every item
    assert len([ln for ln in out.splitlines() if ln.startswith("   x1.000 ")]) == 38
    assert "geometric mean of the ratios (current / baseline): x1.000 over 38 timings" in out


def test_compare_flags_a_new_failure_and_not_a_small_change(tmp_path, capsys):
    df = read_results([PERF])
    df.loc[3, ["verdict", "failure_kind", "reason"]] = ["fail", "mismatch", "dx " + XSS]
    df.loc[5, "time_median_s"] *= 1.05
    df.at[5, "time_samples_s"] = df.at[5, "time_samples_s"] * 1.05
    path = write(df, tmp_path / "c.parquet")
    assert main(["compare", str(PERF), str(path)]) == 1
    out = capsys.readouterr().out
    assert "NEW FAILURES (1):" in out and df.case_id[3] in out and "REGRESSIONS" not in out
    assert "\nnone: regressions, failing new cases" in out
    # a 5 % slowdown is inside the default factor, outside a factor of 1.03
    assert main(["compare", str(PERF), str(path), "--factor", "1.03"]) == 1
    assert "REGRESSIONS (1):" in capsys.readouterr().out


def test_compare_without_common_items_compares_nothing(capsys):
    # exit 3, not 2 (issue 24): the inputs are fine, the gate just has nothing to look at
    assert main(["compare", str(GPU), str(PERF)]) == 3
    out = capsys.readouterr().out
    assert out.strip().splitlines()[-1] == ("result: NOT COMPARED (exit 3): no timed item "
                                            "could be compared: the runs share no (op, case, "
                                            "implementation)")


@pytest.mark.parametrize("argv, needles", [
    (["compare", "nothere.parquet", str(PERF)], ["nothere.parquet"]),
    (["compare", str(PERF), str(PERF), "--factor", "0.9"], ["--factor", "at least 1"]),
    (["compare", str(PERF), str(PERF), "--alpha", "0"], ["--alpha"]),
])
def test_compare_bad_input_is_one_line(argv, needles, capsys):
    assert main(argv) == 2
    one_line_error(capsys, *needles)


# -- known failures, formats, exit 3 (issue 24) ---------------------------------------------

def dao_runs(tmp_path, unexpected_pass=False):
    """Baseline: the gpu run; current: the same plus Dao's adapters, whose padding cases
    fail as declared (one of them passing, on request)."""
    from tests.reports.test_report_known import with_dao

    gpu = read_results([GPU])
    cur = with_dao(gpu)
    if unexpected_pass:
        pad = cur.index[cur["case_id"].str.contains("-pack-padding") & (cur["impl"] == "dao")]
        cur.loc[pad[0], ["verdict", "failure_kind", "reason"]] = ["pass", None, ""]
    return write(cur, tmp_path / "cur.parquet")


def test_compare_expects_known_failures_and_fails_on_an_unexpected_pass(tmp_path, capsys):
    cur = dao_runs(tmp_path)
    assert main(["compare", str(GPU), str(cur)]) == 0
    out = capsys.readouterr().out
    assert "NEW FAILURES" not in out and "FAILING NEW CASES" not in out
    assert "nothing moved:" in out  # known failures are expected: no move
    assert "known failures (expected) (2):" in out and "causal_conv1d [dao]: 13 items" in out
    assert out.strip().splitlines()[-1] == ("result: ok (no regressions, no new failures); "
                                            "26 known failures (expected)")
    (tmp_path / "x").mkdir()
    xpass = dao_runs(tmp_path / "x", unexpected_pass=True)
    assert main(["compare", str(GPU), str(xpass)]) == 1
    out = capsys.readouterr().out
    assert "UNEXPECTED PASSES (1):" in out
    assert "result: REGRESSED (0 regressions, 0 new failures, 0 failing new cases, " \
           "1 unexpected pass); 25 known failures (expected)" in out


def test_compare_json_csv_and_markdown(tmp_path, capsys):
    import csv
    import io
    import json

    path, case, impl = planted(tmp_path)
    assert main(["compare", str(PERF), str(path), "--format", "json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["result"] == "regressed" and doc["exit_code"] == 1 and doc["reason"] is None
    assert doc["counts"]["regressions"] == 1 and doc["counts"]["timed"] == 38
    timings = [r for r in doc["items"] if "ratio" in r]
    assert len(timings) == 38  # every compared item, not only the flagged ones
    assert (timings[0]["case_id"], timings[0]["impl"], timings[0]["category"]) == \
        (case, impl, "regression")
    assert timings[0]["ratio"] == pytest.approx(1.3)
    assert doc["baseline"]["run_ids"] and doc["current"]["device_name"] == ["NVIDIA H200"]

    assert main(["compare", str(PERF), str(path), "--format", "csv"]) == 1
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(rows) == 38 and rows[0]["category"] == "regression"
    assert float(rows[0]["ratio"]) == pytest.approx(1.3) and rows[0]["case_id"] == case
    assert {r["category"] for r in rows[1:]} == {"unchanged"}

    assert main(["compare", str(PERF), str(path), "--format", "markdown"]) == 1
    md = capsys.readouterr().out
    assert md.startswith("## Compare: REGRESSED") and "### Regressions (1)" in md
    assert f"`{case}`" in md and "| regressions | 1 |" in md


def test_compare_machine_formats_say_why_nothing_was_compared(tmp_path, capsys):
    import json

    df = read_results([PERF]).assign(l2_flush="clean")
    other = write(df, tmp_path / "clean.parquet")
    assert main(["compare", str(PERF), str(other), "--format", "json"]) == 3
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert doc["result"] == "not_compared" and doc["exit_code"] == 3
    assert "different L2 flushes" in doc["reason"]
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("compare: NOT COMPARED (exit 3)")


def test_compare_of_untimed_runs_exits_3_unless_allowed(tmp_path, capsys):
    df = read_results([PERF]).assign(time_samples_s=None, time_median_s=None)
    untimed = write(df, tmp_path / "untimed.parquet")
    assert main(["compare", str(untimed), str(untimed)]) == 3
    assert "was timed in both" in capsys.readouterr().out
    assert main(["compare", str(untimed), str(untimed), "--allow-untimed"]) == 0
    assert "no timings compared (--allow-untimed)" in capsys.readouterr().out


def test_compare_help_names_the_exit_codes(capsys):
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    out = capsys.readouterr().out
    for line in ("0  ok", "1  regressed", "2  bad input", "3  nothing compared"):
        assert line in out, line
    assert "--format {text,json,csv,markdown}" in out


def test_report_json_format(tmp_path, capsys):
    import json

    path, case, impl = planted(tmp_path)
    out = tmp_path / "r.json"
    assert main(["report", str(path), "--baseline", str(PERF), "--format", "json",
                 "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["format"] == "bwd-suite-report" and doc["changes"]["gate_failed"] is True
    assert doc["changes"]["ratios"]["n_total"] == 38
    assert doc["summary"]["total"]["items"] == 38


@pytest.mark.parametrize("value, needles", [
    ("softmax=liger", ["--baseline-impl", "op 'softmax'", "causal_conv1d"]),
    ("causal_conv1d=liger", ["--baseline-impl", "causal_conv1d: 'liger'", "torch_tiled"]),
    ("a,b", ["--baseline-impl", "two bare names"]),
])
def test_report_baseline_impl_per_op_bad_input(value, needles, tmp_path, capsys):
    assert main(["report", str(PERF), "--baseline-impl", value, "-o",
                 str(tmp_path / "r.html")]) == 2
    one_line_error(capsys, *needles)


def test_report_baseline_impl_per_op(tmp_path):
    out = tmp_path / "r.html"
    assert main(["report", str(PERF), "--baseline-impl", "causal_conv1d=torch_tiled",
                 "-o", str(out)]) == 0
    assert 'data-baseline="torch_tiled"' in out.read_text()


# -- a rerun command for every failure on the page (issue 40) --------------------------------

def test_each_failure_on_the_page_carries_a_rerun_command_that_reproduces_it(tmp_path, capsys):
    """A CPU run of a mutant; its page (against a baseline where the items passed) shows
    under each failure entry and each new failure the command, as selectable code; run,
    the command fails the same item with the same reason."""
    import shlex

    from bwd_suite.suite.outcomes import Verdict
    from bwd_suite.suite.reproduce import rerun_command
    from tests.reports.test_report import Tree

    cur = tmp_path / "cur.parquet"
    assert main(["run", "--device", "cpu", "--profile", "smoke", "--impl",
                 "mutant_softmax_dot_short", "--case", "softmax/lengths/R13-N7-", "--no-timing",
                 "--workers", "0", "--quiet", "--output", str(cur)]) == 1
    rows = results.read_rows([cur])
    assert [r.verdict for r in rows] == [Verdict.FAIL] * 3
    base = tmp_path / "base.parquet"
    with results.ResultsWriter(base) as w:
        for r in results.read_rows([cur]):
            w.add(r.finish(Verdict.PASS))
    page = tmp_path / "r.html"
    assert main(["report", str(cur), "--baseline", str(base), "-o", str(page)]) == 0
    capsys.readouterr()
    tree = Tree(page.read_text())
    want = {r.case_id: rerun_command(r) for r in rows}
    for section in ("failures", "changes"):
        shown = {case: node.all_text() for case, impl, key, _, node in tree.values(section)
                 if key == "rerun"}
        assert shown == want, section
        assert all(node.tag == "code" for *_, key, _, node in tree.values(section)
                   if key == "rerun")
    words = shlex.split(want[rows[1].case_id])
    assert words[:4] == ["python", "-m", "bwd_suite", "run"]
    again = tmp_path / "again.parquet"
    assert main([*words[3:], "--workers", "0", "--quiet", "--output", str(again)]) == 1
    capsys.readouterr()
    (row,) = results.read_rows([again])
    assert (row.case_id, row.impl, row.verdict, row.reason) == (
        rows[1].case_id, rows[1].impl, Verdict.FAIL, rows[1].reason)
