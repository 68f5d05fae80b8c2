"""Items in worker processes: an implementation that segfaults, aborts, exits, kills
itself or hangs costs its own items' rows (error or timeout, with the exit status and the
last words on stderr) while the run completes with every other row on disk; nothing the
implementation does to `out` or at any stage of the item aborts the run."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bwd_suite.suite import results
from bwd_suite.cli import main
from bwd_suite.suite.outcomes import Verdict
from bwd_suite.suite.rows import ResultRow

BIAS = ["--profile", "ci", "--case", "causal_conv1d/bias/", "--no-timing", "--repeats", "1",
        "--quiet", "--device", "cpu"]
DOOMED = "-silu-init"  # the two bias cases tests/crashing.py dies on
# verdicts of items computed as the eager yardstick does: its 16-bit dweight is weaker
# than the bound on the CPU (weak_yardstick, listed apart, not a failure)
CLEAN = ("pass", "weak_yardstick")
# the four channel-last bias cases of the eight
BIAS_CL = [a.replace("bias/", "bias/B2-D40-L100-K4-bf16-cl-") for a in BIAS]


def _run(tmp_path, impl, *extra):
    out = tmp_path / "r.parquet"
    code = main(["run", *BIAS, "--impl", f"causal_conv1d=tests.crashing:{impl},torch_ref",
                 "--output", str(out), *extra])
    return code, results.read_results([out])


@pytest.mark.parametrize("impl, words", [
    ("segfault", "SIGSEGV"),
    ("abort", "SIGABRT"),
    ("exits", "exited with status 3"),
    ("kills_itself", "SIGKILL"),
])
def test_a_dying_implementation_costs_its_items_only(impl, words, tmp_path, capsys):
    code, df = _run(tmp_path, impl)
    assert code == 1
    assert len(df) == 16  # 8 cases x 2 implementations: every row on disk
    mine = df[df.impl == f"tests.crashing:{impl}"]
    dead = mine[mine.case_id.str.endswith(DOOMED)]
    assert len(dead) == 2 and (dead.verdict == "error").all()
    assert (dead.failure_kind == "worker died").all()
    assert dead.reason.str.contains(words).all(), list(dead.reason)
    if impl == "abort":  # the worker's last words on stderr come with the row
        assert dead.reason.str.contains("about to abort: last words").all()
    alive = mine[~mine.case_id.str.endswith(DOOMED)]
    assert len(alive) == 6 and (alive.verdict == "pass").all()
    assert df[df.impl == "torch_ref"].verdict.isin(CLEAN).all()  # later items ran


def test_a_hanging_implementation_times_out_and_the_run_goes_on(tmp_path, capsys):
    code, df = _run(tmp_path, "hangs", "--item-timeout", "5")
    assert code == 1 and len(df) == 16
    mine = df[df.impl == "tests.crashing:hangs"]
    hung = mine[mine.case_id.str.endswith(DOOMED)]
    assert (hung.verdict == "timeout").all() and len(hung) == 2
    assert hung.reason.str.contains("still running after 5 s").all()
    assert (mine[~mine.case_id.str.endswith(DOOMED)].verdict == "pass").all()


@pytest.mark.parametrize("impl, reason", [
    ("replaces_dx", "output replaced, not written"),
    ("deletes_dx", "output replaced, not written"),
])
def test_replacing_or_deleting_an_output_fails_the_item(impl, reason, tmp_path, capsys):
    code, df = _run(tmp_path, impl, "--workers", "0")
    mine = df[df.impl == f"tests.crashing:{impl}"]
    assert code == 1 and len(mine) == 8
    assert (mine.verdict == "fail").all() and (mine.failure_kind == "output replaced").all()
    assert mine.reason.str.contains(reason).all()
    if impl == "replaces_dx":  # the tensor it was given is checked: still the poison
        assert mine.reason.str.contains("unwritten output dx").all()


def test_raising_while_timed_is_the_items_error_row(tmp_path, capsys):
    out = tmp_path / "r.parquet"
    code = main(["run", "--profile", "ci", "--case", "causal_conv1d/bias/", "--repeats", "1",
                 "--samples", "3", "--warmup", "1", "--quiet", "--device", "cpu",
                 "--impl", "causal_conv1d=tests.crashing:raises_when_timed",
                 "--output", str(out), "--workers", "0"])
    df = results.read_results([out])
    assert code == 1 and len(df) == 8 and (df.verdict == "error").all()
    assert df.reason.str.contains("while being timed: deliberate failure").all()


def test_an_interrupted_run_is_readable_from_its_journal(tmp_path):
    """The journal holds every row as it finished: readers see a run that never closed."""
    path = tmp_path / "r.parquet"
    w = results.ResultsWriter(path)
    for i in range(3):
        w.add(ResultRow(op="softmax", case_id=f"c{i}", impl="x").finish(Verdict.PASS))
    assert not path.exists()
    df = results.read_results([path])  # the parquet path of a run that did not finish
    assert list(df.case_id) == ["c0", "c1", "c2"]
    assert list(results.read_results([tmp_path]).case_id) == ["c0", "c1", "c2"]
    # a line cut by the crash is dropped, not an error
    with open(results.journal_path(path), "a") as f:
        f.write(json.dumps({"op": "softmax"})[:7])
    assert len(results.read_results([path])) == 3
    w.close()
    assert path.exists() and not results.journal_path(path).exists()
    assert len(results.read_results([tmp_path])) == 3


def test_two_runs_never_write_the_same_file(tmp_path, capsys):
    out = tmp_path / "r.parquet"
    # in-process (--workers 0): the refusal comes before any item, workers have their tests
    args = ["run", *BIAS, "--impl", "torch_ref", "--output", str(out), "--workers", "0"]
    assert main(args) == 0
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: --output: ") and "exists" in err[-1]
    assert main(args + ["--force"]) == 0


def test_rerun_failed_runs_exactly_the_failing_items(tmp_path, capsys):
    code, df = _run(tmp_path, "exits")
    assert code == 1
    again = tmp_path / "again.parquet"
    code = main(["run", "--rerun-failed", str(tmp_path / "r.parquet"), "--no-timing",
                 "--impl", "causal_conv1d=tests.crashing:exits",
                 "--repeats", "1", "--quiet", "--device", "cpu", "--output", str(again)])
    df2 = results.read_results([again])
    assert code == 1
    assert sorted(df2.case_id) == sorted(df[df.verdict == "error"].case_id)
    assert set(df2.impl) == {"tests.crashing:exits"}


def test_sigint_to_a_run_with_workers_keeps_every_finished_row(tmp_path):
    """A real Ctrl-C (SIGINT to the run) while a worker hangs: exit 130, the finished rows
    in the results file, the worker gone."""
    out = tmp_path / "r.parquet"
    proc = subprocess.Popen(
        [sys.executable, "-m", "bwd_suite", "run", *BIAS, "--impl",
         "causal_conv1d=tests.crashing:hangs", "--output", str(out)],
        cwd=Path(__file__).resolve().parents[2], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    journal = results.journal_path(out)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # until the rows before the hanging item are in
        if journal.exists() and len(journal.read_text().splitlines()) >= 1 + 2:
            break
        time.sleep(0.2)
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-2000:]
    df = results.read_results([out])
    assert len(df) >= 2 and (df.verdict == "pass").all()
    assert f"interrupted: {len(df)} of 8 items finished, kept" in err
    (state,) = results.completeness([out])
    assert state.incomplete and state.planned == 8 and state.rows == len(df)


def test_a_lost_cuda_context_costs_one_item_and_a_fresh_worker_runs_the_rest(tmp_path):
    """In one process a sticky fault leaves every later item not run; with workers the
    worker that lost its context is replaced, and the next items run (a CPU stand-in for
    the fault: tests.helpers.loses_cuda_context). On the four channel-last bias cases, not
    all eight: each lost context costs a worker start (~2.5 s of importing torch)."""
    out = tmp_path / "r.parquet"
    code = main(["run", *BIAS_CL, "--impl",
                 "causal_conv1d=tests.helpers:loses_cuda_context,torch_ref",
                 "--output", str(out)])
    df = results.read_results([out])
    assert code == 1 and len(df) == 8
    lost = df[df.impl == "tests.helpers:loses_cuda_context"]
    assert (lost.verdict == "error").all()
    assert lost.reason.str.contains("misaligned address").all()
    assert not lost.reason.str.startswith("not run").any()  # each ran on a fresh worker
    assert df[df.impl == "torch_ref"].verdict.isin(CLEAN).all()


def test_declared_failures_do_not_fail_the_run_and_unexpected_passes_do(tmp_path, capsys):
    """tests.helpers declares 'dx deliberately doubled' for the bias cases: the one that
    does double dx fails as declared (exit 0, listed apart), the correct one passes
    against the declaration (exit 1, an unexpected pass)."""
    out = tmp_path / "bad.parquet"
    assert main(["run", *BIAS, "--impl", "tests.helpers:known_bad", "--output", str(out)]) == 0
    text = capsys.readouterr().out
    assert "8 known failures (declared by the implementation, expected)" in text
    assert "failing items" not in text
    df = results.read_results([out])
    assert (df.verdict == "fail").all() and (df.known_failure == "dx deliberately doubled").all()
    out = tmp_path / "good.parquet"
    assert main(["run", *BIAS, "--impl", "tests.helpers:known_good", "--output", str(out)]) == 1
    assert "8 unexpected passes" in capsys.readouterr().out
