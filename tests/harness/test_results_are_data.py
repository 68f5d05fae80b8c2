"""A results file is data from anywhere (a nightly job's artifact): reading one never imports
what it names, every reader refuses a foreign or corrupt file in one line (exit 2), and a
run that did not finish its plan is never read as a whole one (compare exits 4)."""

import json
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bwd_suite.suite import results
from bwd_suite.cli import main
from bwd_suite.suite.errors import SuiteInputError
from bwd_suite.suite.outcomes import FailureKind, Verdict
from bwd_suite.suite.rows import ResultRow
from tests.reports.test_report import PERF
from tests.reports.test_report_cli import one_line_error

CASE = "causal_conv1d/bias/B2-D40-L100-K4-bf16-cf-nobias"  # a case of the ci profile
BOOM = "tests.faults.boom"  # leaves a marker file when imported
RERUN = ["--device", "cpu", "--no-timing", "--repeats", "1", "--quiet"]


def failing(impl: str, **kw) -> ResultRow:
    return ResultRow(run_id="r1", op="causal_conv1d", case_id=CASE, impl=impl,
                     verdict=Verdict.FAIL, failure_kind=FailureKind.MISMATCH,
                     reason="dx wrong", **kw)


def write(path, rows, **writer):
    with results.ResultsWriter(path, **writer) as w:
        for r in rows:
            w.add(r)
    return path


# -- run --rerun-failed imports nothing a results file names ---------------------------------

@pytest.fixture
def boom(tmp_path, monkeypatch):
    """The marker file that importing tests.faults.boom leaves, the module not imported."""
    marker = tmp_path / "imported"
    monkeypatch.setenv("BWD_SUITE_BOOM_MARKER", str(marker))
    monkeypatch.delitem(sys.modules, BOOM, raising=False)
    return marker


def test_rerun_failed_never_imports_a_module_named_in_the_results(tmp_path, boom, capsys):
    source = write(tmp_path / "nightly.parquet", [failing(f"{BOOM}:fn")])
    out = tmp_path / "again.parquet"
    assert main(["run", "--rerun-failed", str(source), *RERUN, "--output", str(out)]) == 2
    one_line_error(capsys, "--rerun-failed", str(source), f"'{BOOM}:fn'",
                   f"--impl causal_conv1d={BOOM}:fn")
    assert not boom.exists() and BOOM not in sys.modules
    assert not out.exists() and not results.journal_path(out).exists()


def test_rerun_failed_refuses_an_unknown_name_naming_the_file(tmp_path, capsys):
    source = write(tmp_path / "nightly.parquet", [failing("no_such_impl")])
    assert main(["run", "--rerun-failed", str(source), *RERUN, "--output",
                 str(tmp_path / "again.parquet")]) == 2
    one_line_error(capsys, "--rerun-failed", str(source), "'no_such_impl'",
                   "--impl OP=module:object")


def test_rerun_failed_names_the_origin_of_a_decorated_implementation(tmp_path, capsys):
    """Its name (its registration) says nothing of its module: the row's origin does."""
    row = failing("mine")
    row.impl_origin = f"causal_conv1d={BOOM}:mine"
    source = write(tmp_path / "nightly.parquet", [row])
    assert main(["run", "--rerun-failed", str(source), *RERUN, "--output",
                 str(tmp_path / "again.parquet")]) == 2
    one_line_error(capsys, "--rerun-failed", "'mine'", f"--impl causal_conv1d={BOOM}:mine")


@pytest.mark.parametrize("spec, workers", [
    (f"causal_conv1d={BOOM}:fn", "0"),
    (f"{BOOM}:fn", "0"),  # bound to the op of the rows that name it
    (f"{BOOM}:fn", "1"),  # a worker finds it again by its origin
])
def test_rerun_failed_runs_an_implementation_the_command_line_names(spec, workers, tmp_path,
                                                                    boom, capsys):
    source = write(tmp_path / "nightly.parquet", [failing(f"{BOOM}:fn")])
    out = tmp_path / "again.parquet"
    assert main(["run", "--rerun-failed", str(source), "--impl", spec, "--workers", workers,
                 *RERUN, "--output", str(out)]) == 0
    df = results.read_results([out])
    assert list(df.case_id) == [CASE] and list(df.impl) == [f"{BOOM}:fn"]
    assert list(df.verdict) == ["pass"]
    assert boom.exists()  # imported because the command line asked for it


def test_rerun_failed_still_runs_registered_implementations(tmp_path, capsys):
    source = write(tmp_path / "nightly.parquet", [failing("torch_tiled")])
    out = tmp_path / "again.parquet"
    assert main(["run", "--rerun-failed", str(source), *RERUN, "--workers", "0",
                 "--output", str(out)]) == 0
    assert list(results.read_results([out]).impl) == ["torch_tiled"]


# -- every reader checks the schema ------------------------------------------------------------

def _record(**changes) -> dict:
    return dict(failing("torch_ref").to_record(), **changes)


def _journal(path, head, *lines):
    path.write_text("\n".join(json.dumps(x) for x in (head, *lines)) + "\n")
    return path


HEAD = {results.VERSION_FIELD: results.SCHEMA_VERSION}


def _parquet(path, table=None, metadata=None, **changes):
    table = table if table is not None else pa.Table.from_pylist([_record(**changes)],
                                                                 schema=results.SCHEMA)
    if metadata is not None:
        table = table.replace_schema_metadata({**results.SCHEMA.metadata, **metadata})
    pq.write_table(table, path)
    return path


def _retyped(name, values):
    """A current-version table with column `name` of another type."""
    table = pa.Table.from_pylist([_record()], schema=results.SCHEMA)
    i = table.schema.get_field_index(name)
    return table.set_column(i, name, pa.array(values)).replace_schema_metadata(
        results.SCHEMA.metadata)


def _good_bytes(tmp_path) -> bytes:
    return write(tmp_path / "whole.parquet", [failing("torch_ref")]).read_bytes()


def _file(path, data: bytes):
    path.write_bytes(data)
    return path


def _folder(path):
    path.mkdir()
    return path


FAULTS = {
    # journals
    "a JSON list as header": (lambda d: _journal(d / "j.parquet.journal",
                                                 [results.VERSION_FIELD, 9], _record()),
                              "no JSON object with a schema version"),
    "a JSON string as header": (lambda d: _journal(d / "j.parquet.journal",
                                                   results.VERSION_FIELD, _record()),
                                "no JSON object with a schema version"),
    "a text version tag": (lambda d: _journal(d / "j.parquet.journal",
                                              {results.VERSION_FIELD: "abc"}, _record()),
                           "schema version tag 'abc' is not an integer"),
    "a list as a row": (lambda d: _journal(d / "j.parquet.journal", HEAD, _record(), [1, 2],
                                           _record()),
                        "line 3: a JSON list where a row (an object) belongs"),
    "a string as a row": (lambda d: _journal(d / "j.parquet.journal", HEAD, "pwned", _record()),
                          "line 2: a JSON str where a row"),
    "a number as a row": (lambda d: _journal(d / "j.parquet.journal", HEAD, 7, _record()),
                          "line 2: a JSON int where a row"),
    "a row without a column": (lambda d: _journal(
        d / "j.parquet.journal", HEAD, {k: v for k, v in _record().items() if k != "impl"}),
        "missing columns ['impl']"),
    "a row with a foreign column": (lambda d: _journal(d / "j.parquet.journal", HEAD,
                                                       _record(run="x")),
                                    "unknown columns ['run']"),
    "a journal verdict 'pwned'": (lambda d: _journal(d / "j.parquet.journal", HEAD,
                                                     _record(verdict="pwned")),
                                  "column 'verdict' holds 'pwned'"),
    "a null verdict": (lambda d: _journal(d / "j.parquet.journal", HEAD, _record(verdict=None)),
                       "column 'verdict' holds None"),
    "a journal value of the wrong type": (lambda d: _journal(d / "j.parquet.journal", HEAD,
                                                             _record(case_id=5)),
                                          "rows do not match the schema"),
    "a planned count that is no count": (lambda d: _journal(
        d / "j.parquet.journal", dict(HEAD, bwd_suite_planned_items="many"), _record()),
        "planned item count 'many'"),
    # parquet files
    "a parquet text version tag": (lambda d: _parquet(
        d / "p.parquet", metadata={b"bwd_suite_schema_version": b"abc"}),
        "schema version tag 'abc' is not an integer"),
    "a parquet verdict 'pwned'": (lambda d: _parquet(d / "p.parquet", verdict="pwned"),
                                  "column 'verdict' holds 'pwned'"),
    "a failure kind 'bogus'": (lambda d: _parquet(d / "p.parquet", failure_kind="bogus"),
                               "column 'failure_kind' holds 'bogus'"),
    "a determinism 'maybe'": (lambda d: _parquet(d / "p.parquet", determinism="maybe"),
                              "column 'determinism' holds 'maybe'"),
    "timings as text": (lambda d: _parquet(d / "p.parquet",
                                           _retyped("time_median_s", ["0.5"])),
                        "column 'time_median_s' is string, not double"),
    "a case id as a number": (lambda d: _parquet(d / "p.parquet", _retyped("case_id", [5])),
                              "column 'case_id' is int64, not string"),
    "a foreign column": (lambda d: _parquet(d / "p.parquet", pa.Table.from_pylist(
        [_record()], schema=results.SCHEMA).append_column("run", pa.array(["x"]))
        .replace_schema_metadata(results.SCHEMA.metadata)), "unknown columns ['run']"),
    "a newer schema": (lambda d: _parquet(d / "p.parquet",
                                          metadata={b"bwd_suite_schema_version": b"99"}),
                       "schema version 99, newer than this suite reads"),
    "a finished tag of neither kind": (lambda d: _parquet(
        d / "p.parquet", metadata={b"bwd_suite_finished": b"maybe"}),
        "finished tag b'maybe' is not complete or interrupted"),
    "a truncated file": (lambda d: _file(d / "p.parquet", _good_bytes(d)[:300]),
                         "not a readable parquet file"),
    "garbage": (lambda d: _file(d / "p.parquet", b"PAR1" + b"\x07" * 64 + b"PAR1"),
                "not a readable parquet file"),
    "an empty file": (lambda d: _file(d / "p.parquet", b""), "not a readable parquet file"),
    "a folder without results": (lambda d: _folder(d / "nothing"),
                                 "holds no .parquet results"),
}


@pytest.mark.parametrize("fault", FAULTS)
def test_a_foreign_or_corrupt_file_is_one_line_in_every_reader(fault, tmp_path, capsys):
    make, words = FAULTS[fault]
    (tmp_path / "bad").mkdir()
    bad = make(tmp_path / "bad")
    with pytest.raises(SuiteInputError) as e:
        results.read_results([bad])
    assert str(bad) in str(e.value) and words in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(SuiteInputError) as e:
        results.read_rows([bad])
    assert words in str(e.value)
    good = write(tmp_path / "good.parquet", [failing("torch_ref")])
    assert main(["compare", str(good), str(bad)]) == 2
    one_line_error(capsys, str(bad), words)
    assert main(["compare", str(bad), str(good)]) == 2
    one_line_error(capsys, str(bad), words)
    assert main(["report", str(bad), "-o", str(tmp_path / "r.html")]) == 2
    one_line_error(capsys, str(bad), words)
    assert not (tmp_path / "r.html").exists()


# -- how complete a run is ------------------------------------------------------------------------

def test_the_writer_records_the_plan_and_how_the_run_ended(tmp_path):
    path = tmp_path / "r.parquet"
    w = results.ResultsWriter(path, planned=18)
    w.add(failing("torch_ref"))
    w.add(failing("torch_tiled"))
    journal = results.journal_path(path)
    head = json.loads(journal.read_text().splitlines()[0])
    assert head == {results.VERSION_FIELD: results.SCHEMA_VERSION,
                    "bwd_suite_planned_items": 18}
    [state] = results.completeness([path])
    assert (state.path, state.rows, state.planned, state.state) == \
        (journal, 2, 18, results.RunState.UNFINISHED)
    assert state.incomplete
    assert state.describe() == f"{journal}: an unfinished run (no parquet file; 2 of 18 " \
                               f"planned items)"
    w.close(interrupted=True)
    meta = pq.read_schema(path).metadata
    assert meta[b"bwd_suite_planned_items"] == b"18"
    assert meta[b"bwd_suite_finished"] == b"interrupted"
    [state] = results.completeness([path])
    assert state.state is results.RunState.INTERRUPTED and state.incomplete
    assert state.describe() == f"{path}: an interrupted run (2 of 18 planned items)"
    assert len(results.read_results([path])) == 2  # the rows are read as before


def test_a_complete_run_and_one_short_of_its_plan(tmp_path):
    whole = write(tmp_path / "whole.parquet", [failing("torch_ref")], planned=1)
    short = write(tmp_path / "short.parquet", [failing("torch_ref")], planned=3)
    [w, s] = results.completeness([whole, short])
    assert w.state is s.state is results.RunState.COMPLETE
    assert not w.incomplete and w.describe() == f"{whole}: a complete run (1 of 1 planned items)"
    assert s.incomplete
    assert s.describe() == f"{short}: a run with fewer items than planned (1 of 3 planned items)"


def test_an_exception_out_of_the_writer_block_marks_the_run_interrupted(tmp_path):
    path = tmp_path / "r.parquet"
    with pytest.raises(KeyboardInterrupt):
        with results.ResultsWriter(path) as w:
            w.add(failing("torch_ref"))
            raise KeyboardInterrupt
    [state] = results.completeness([path])
    assert state.state is results.RunState.INTERRUPTED and state.planned is None
    assert state.describe() == f"{path}: an interrupted run (1 items, plan unknown)"


def test_files_without_the_keys_read_as_complete_runs_of_an_unknown_plan():
    [state] = results.completeness([PERF])
    assert state.state is results.RunState.COMPLETE and state.planned is None
    assert state.rows == 38 and not state.incomplete


@pytest.mark.parametrize("planned", [-1, 2.5, True, "3"])
def test_the_writer_takes_a_count_as_its_plan(planned, tmp_path):
    with pytest.raises(ValueError, match="planned items"):
        results.ResultsWriter(tmp_path / "r.parquet", planned=planned)


# -- compare and report say so first; compare exits 4 ---------------------------------------------

def unfinished(tmp_path, n=2, name="cur.parquet"):
    """The journal of a run of PERF's 38 items that crashed after `n` of them."""
    path = tmp_path / name
    w = results.ResultsWriter(path, planned=38)
    for r in results.read_rows([PERF])[:n]:
        w.add(r)
    return path, results.journal_path(path)


def test_compare_of_an_unfinished_run_exits_4_and_says_so_first(tmp_path, capsys):
    cur, journal = unfinished(tmp_path)
    assert main(["compare", str(PERF), str(cur)]) == 4  # was 0, "result: ok"
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0] == (f"INCOMPLETE current run: {journal}: an unfinished run (no parquet "
                        f"file; 2 of 38 planned items): compare exits 4 (--allow-incomplete "
                        f"gates on its finished items)")
    assert lines[-1].startswith("result: INCOMPLETE (exit 4): the current run did not finish "
                                "its plan")
    assert lines[-1].endswith("its finished items: ok (no regressions, no new failures)")
    assert main(["compare", str(PERF), str(cur), "--allow-incomplete"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("INCOMPLETE current run: ") and "(--allow-incomplete)" in lines[0]
    assert lines[-1].startswith("result: ok")


def test_compare_of_an_interrupted_or_short_run_exits_4(tmp_path, capsys):
    rows = results.read_rows([PERF])[:3]
    interrupted = tmp_path / "i.parquet"
    w = results.ResultsWriter(interrupted, planned=38)
    for r in rows:
        w.add(r)
    w.close(interrupted=True)
    short = write(tmp_path / "s.parquet", rows, planned=38)
    for path, words in ((interrupted, "an interrupted run (3 of 38 planned items)"),
                        (short, "a run with fewer items than planned (3 of 38")):
        assert main(["compare", str(PERF), str(path)]) == 4
        first = capsys.readouterr().out.splitlines()[0]
        assert first.startswith("INCOMPLETE current run: ") and words in first


def test_an_incomplete_baseline_is_stated_not_gated(tmp_path, capsys):
    base, journal = unfinished(tmp_path, name="base.parquet")
    assert main(["compare", str(base), str(PERF)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith(f"INCOMPLETE baseline run: {journal}: an unfinished run")
    assert lines[-1].startswith("result: ok")


def test_compare_machine_formats_say_an_unfinished_run_first(tmp_path, capsys):
    cur, journal = unfinished(tmp_path)
    assert main(["compare", str(PERF), str(cur), "--format", "json"]) == 4
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert doc["result"] == "incomplete" and doc["exit_code"] == 4
    [state] = doc["incomplete"]["current"]
    assert (state["path"], state["rows"], state["planned"], state["state"]) == \
        (str(journal), 2, 38, "unfinished")
    assert doc["incomplete"]["baseline"] == [] and "an unfinished run" in doc["reason"]
    assert captured.err.splitlines()[0].startswith("compare: INCOMPLETE current run: ")
    assert main(["compare", str(PERF), str(cur), "--format", "markdown"]) == 4
    md = capsys.readouterr().out
    assert md.startswith("**INCOMPLETE current run: ") and "## Compare: INCOMPLETE" in md
    assert main(["compare", str(PERF), str(cur), "--format", "csv"]) == 4
    assert "INCOMPLETE current run" in capsys.readouterr().err


def test_compare_help_names_exit_4(capsys):
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    out = capsys.readouterr().out
    assert "4  incomplete" in out and "--allow-incomplete" in out


def test_report_of_an_unfinished_run_says_so_first(tmp_path, capsys):
    cur, journal = unfinished(tmp_path)
    out = tmp_path / "r.html"
    assert main(["report", str(cur), "--baseline", str(PERF), "-o", str(out)]) == 0
    html = out.read_text()
    body = html[html.index("<body>") + len("<body>"):].lstrip()
    assert body.startswith('<p class="notice warn incomplete">Incomplete results: '
                           f'{journal}: an unfinished run (no parquet file; 2 of 38 planned '
                           f'items)')
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"report: Incomplete results: {journal}: an unfinished run")
    assert main(["report", str(PERF), "-o", str(out)]) == 0
    assert "Incomplete" not in out.read_text()  # a complete run has no banner
    assert not capsys.readouterr().err.startswith("report: Incomplete")
