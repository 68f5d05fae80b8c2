"""`python -m suite report` and `python -m suite compare`: files written, exit codes for CI
gating (1 on a regression or a new failure), and one-line errors on bad input."""

import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from suite import results
from suite.cli import main
from suite.results import read_results
from tests.reports.test_report import GPU, PERF, XSS


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
    assert "<script" not in out.read_text()


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
    assert main(["compare", str(PERF), str(other)]) == 0  # the planted slowdown is not read
    out = capsys.readouterr().out
    assert f"not compared: {timed} items timed in both runs after different L2 flushes" in out
    assert "REGRESSIONS (0)" in out and "l2_flush: " in out
    html = tmp_path / "r.html"
    assert main(["report", str(other), "--baseline", str(PERF), "--output", str(html)]) == 0
    assert f"{timed} items were timed after another kind of L2 flush" in html.read_text()


def test_compare_of_identical_runs_passes(tmp_path, capsys):
    copy = shutil.copy(PERF, tmp_path / "copy.parquet")
    assert main(["compare", str(PERF), str(copy)]) == 0
    out = capsys.readouterr().out
    assert "REGRESSIONS (0)" in out and "result: ok" in out


def test_compare_flags_a_new_failure_and_not_a_small_change(tmp_path, capsys):
    df = read_results([PERF])
    df.loc[3, ["verdict", "failure_kind", "reason"]] = ["fail", "mismatch", "dx " + XSS]
    df.loc[5, "time_median_s"] *= 1.05
    df.at[5, "time_samples_s"] = df.at[5, "time_samples_s"] * 1.05
    path = write(df, tmp_path / "c.parquet")
    assert main(["compare", str(PERF), str(path)]) == 1
    out = capsys.readouterr().out
    assert "NEW FAILURES (1):" in out and df.case_id[3] in out and "REGRESSIONS (0)" in out
    # a 5 % slowdown is inside the default factor, outside a factor of 1.03
    assert main(["compare", str(PERF), str(path), "--factor", "1.03"]) == 1
    assert "REGRESSIONS (1):" in capsys.readouterr().out


def test_compare_without_common_items_is_bad_input(capsys):
    assert main(["compare", str(GPU), str(PERF)]) == 2
    one_line_error(capsys, "shares no (op, case, implementation)")


@pytest.mark.parametrize("argv, needles", [
    (["compare", "nothere.parquet", str(PERF)], ["nothere.parquet"]),
    (["compare", str(PERF), str(PERF), "--factor", "0.9"], ["--factor", "at least 1"]),
    (["compare", str(PERF), str(PERF), "--alpha", "0"], ["--alpha"]),
])
def test_compare_bad_input_is_one_line(argv, needles, capsys):
    assert main(argv) == 2
    one_line_error(capsys, *needles)
