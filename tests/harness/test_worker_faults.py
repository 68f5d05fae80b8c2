"""What an implementation does to its worker process costs its own items, never the run:
a module that fails to load only in a worker, bytes written into the worker's pipe, forks,
floods of output, a run killed under its workers, and a fuzz whose implementation crashes
while being shrunk (the fault modules are under tests/faults/)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bwd_suite.suite import results, workers
from bwd_suite.cli import main

ROOT = Path(__file__).resolve().parents[2]
BIAS = ["--profile", "ci", "--case", "causal_conv1d/bias/", "--no-timing", "--repeats", "1",
        "--quiet", "--device", "cpu"]
DOOMED = "-silu-init"  # the two bias cases tests/faults/misbehaving.py acts on
# verdicts of items computed as the eager yardstick does: its 16-bit dweight is weaker
# than the bound on the CPU (weak_yardstick, listed apart, not a failure)
CLEAN = ("pass", "weak_yardstick")


def _suite(tmp_path, *argv, env=None, timeout=240):
    """`python -m bwd_suite ...` in a process of its own, bounded: a run that loops fails the
    test instead of hanging it."""
    proc = subprocess.run([sys.executable, "-m", "bwd_suite", *argv], cwd=ROOT, text=True,
                          capture_output=True, timeout=timeout,
                          env={**os.environ, **(env or {})})
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize("how, words", [
    ("raise", "cannot be loaded in a worker process: 'causal_conv1d=tests.faults."
              "worker_import:fn' cannot be imported: no such device"),
    ("segfault", "its worker died 2 times while loading"),
    ("exit", "its worker died 2 times while loading"),
])
def test_a_module_that_fails_to_load_in_the_worker_costs_its_items_not_the_run(
        how, words, tmp_path):
    out = tmp_path / "r.parquet"
    code, stdout, err = _suite(tmp_path, "run", *BIAS, "--impl",
                               "causal_conv1d=tests.faults.worker_import:fn,torch_ref",
                               "--output", str(out), env={"BWD_SUITE_FAULT": how})
    assert code == 1, err[-2000:]
    df = results.read_results([out])
    assert len(df) == 16  # every item has its row: the run ended
    mine = df[df.impl == "tests.faults.worker_import:fn"]
    assert (mine.verdict == "error").all() and (mine.failure_kind == "not loaded").all()
    assert mine.reason.str.contains(words, regex=False).all(), list(mine.reason)[:1]
    assert df[df.impl == "torch_ref"].verdict.isin(CLEAN).all()
    assert "failing items" in stdout  # the summary was printed


@pytest.mark.parametrize("impl", ["garbage", "pickle_bomb"])
def test_bytes_written_into_the_workers_pipe_cost_that_item_and_execute_nothing(
        impl, tmp_path):
    out, marker = tmp_path / "r.parquet", tmp_path / "executed"
    code, stdout, err = _suite(tmp_path, "run", *BIAS, "--impl",
                               f"causal_conv1d=tests.faults.misbehaving:{impl},torch_ref",
                               "--output", str(out), env={"BWD_SUITE_MARKER": str(marker)})
    assert code == 1, err[-2000:]
    assert not marker.exists()  # nothing a worker sends is unpickled
    assert out.exists() and not results.journal_path(out).exists()  # compacted
    df = results.read_results([out])
    assert len(df) == 16
    mine = df[df.impl == f"tests.faults.misbehaving:{impl}"]
    hit = mine[mine.case_id.str.endswith(DOOMED)]
    assert (hit.verdict == "error").all() and len(hit) == 2
    assert hit.reason.str.contains("not its messages").all(), list(hit.reason)
    assert (mine[~mine.case_id.str.endswith(DOOMED)].verdict == "pass").all()
    assert df[df.impl == "torch_ref"].verdict.isin(CLEAN).all()
    assert "failing items" in stdout


def test_a_forking_implementation_never_adds_rows(tmp_path):
    out = tmp_path / "r.parquet"
    code, _, err = _suite(tmp_path, "run", *BIAS, "--repeats", "3", "--impl",
                          "causal_conv1d=tests.faults.misbehaving:forks,torch_ref",
                          "--output", str(out))
    assert code == 0, err[-2000:]
    df = results.read_results([out])
    assert len(df) == 16 and not df.duplicated(["case_id", "impl"]).any()
    assert df.verdict.isin(CLEAN).all()


def test_what_an_implementation_prints_is_kept_per_item_and_capped(tmp_path, monkeypatch,
                                                                    capsys):
    monkeypatch.setattr(workers, "LOG_CAP_BYTES", 1 << 20)
    out = tmp_path / "r.parquet"
    code = main(["run", *BIAS, "--impl",
                 "causal_conv1d=tests.faults.misbehaving:noisy,torch_ref",
                 "--output", str(out)])
    captured = capsys.readouterr()
    assert code == 1
    assert "stdout line of the implementation" not in captured.out + captured.err
    df = results.read_results([out])
    mine = df[df.impl == "tests.faults.misbehaving:noisy"]
    hit = mine[mine.case_id.str.endswith(DOOMED)]
    fine = mine[~mine.case_id.str.endswith(DOOMED)]
    assert fine.output.str.contains("stdout line of the implementation").all()
    # a doomed item's tail ends with its 4 MiB stderr line, cut; the stdout line before it
    # is dropped when the watchdog cuts the log after that write (a log is a tail)
    assert hit.output.str.contains("E" * 100 + r" \[\.\.\.\]$").all(), list(hit.output)
    assert (mine.output.str.len() <= workers.OUTPUT_TAIL_CHARS).all()
    assert (hit.verdict == "error").all()
    assert hit.reason.str.contains("deliberate failure after printing").all()
    assert (hit.reason.str.len() < 5000).all()  # not the 4 MiB line
    assert (df[df.impl == "torch_ref"].output.isna()).all()  # it printed nothing
    logs = list((tmp_path / "r.parquet.workers").glob("worker-*.log"))
    assert logs and all(f.stat().st_size <= workers.LOG_KEEP_BYTES + 200 for f in logs)


def test_the_workers_die_with_a_killed_run(tmp_path):
    out, pid_file = tmp_path / "r.parquet", tmp_path / "worker.pid"
    proc = subprocess.Popen(
        [sys.executable, "-m", "bwd_suite", "run", *BIAS, "--impl",
         "causal_conv1d=tests.faults.misbehaving:hangs_and_tells", "--output", str(out)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "BWD_SUITE_PID_FILE": str(pid_file)})
    deadline = time.monotonic() + 120
    while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.2)
    worker = int(pid_file.read_text())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            os.kill(worker, 0)
        except ProcessLookupError:
            break
        time.sleep(0.2)
    else:
        os.kill(worker, signal.SIGKILL)
        pytest.fail("the worker outlived the run it worked for")
    assert len(results.read_results([out])) >= 1  # the journal kept what finished


def test_fuzz_shrinks_a_crashing_implementation_through_its_workers(tmp_path):
    out = tmp_path / "f.parquet"
    code, stdout, err = _suite(tmp_path, "fuzz", "--op", "causal_conv1d", "--impl",
                               "causal_conv1d=tests.crashing:segfault", "--budget", "12",
                               "--seed", "3", "--shrink-tries", "4", "--device", "cpu",
                               "--output", str(out), "--quiet", timeout=420)
    assert code == 1, err[-3000:]
    assert "[[case]]" in stdout and "worker died" in stdout, (stdout, err[-2000:])
    rows = results.read_rows([out])
    shrunk = [r for r in rows if "shrunk" in r.tags]
    assert shrunk and shrunk[0].failure_kind.value == "worker died"
    assert "SIGSEGV" in shrunk[0].reason


def test_a_worker_cuts_its_own_log_and_each_item_owns_only_what_it_wrote(tmp_path):
    """The worker cuts its log between items and during an item that prints on, and reads
    each item's output itself: never the cut's notice or an earlier item's tail (CI twice
    gave a silent torch_ref the noisy implementation's output while the parent cut the
    log: a size read between its truncate and its rewrite)."""
    from bwd_suite.suite.worker_log import WorkerLog

    log = tmp_path / "worker-0.log"
    log.write_bytes(b"noise of an earlier item\n" * 200)
    sent = []
    wlog = WorkerLog(str(log), cap_bytes=1000, keep_bytes=100,
                     send=lambda **m: sent.append(m))

    def write(data: bytes):
        with open(log, "ab") as f:
            f.write(data)

    wlog.begin(task=1, i=0)  # cut first: 5000 bytes
    assert log.stat().st_size < 1000
    assert sent[-1] == {"m": "start", "log": log.stat().st_size, "task": 1, "i": 0}
    write(b"mine\n")
    assert wlog.end() == "mine"
    wlog.check()  # no item in flight: the watchdog leaves the log alone
    assert len(sent) == 1
    wlog.begin(task=1, i=1)
    write(b"0123456789abcdef\n" * 100 + b"last words\n")
    wlog.check()  # 1700 bytes into the item: cut, and the item begins at the kept tail
    assert sent[-1]["m"] == "log_cut" and log.stat().st_size < 1000
    assert log.read_bytes()[sent[-1]["start"]:].endswith(b"last words\n")
    out = wlog.end()
    assert out.endswith("last words") and "noise" not in out and "mine" not in out
    assert "dropped" not in out


def test_the_parent_cuts_a_log_its_worker_did_not_keep(tmp_path, monkeypatch):
    """Past the hard cap (a worker whose watchdog cannot run) the parent cuts, and the item
    in flight keeps what it wrote that was kept."""
    from types import SimpleNamespace

    monkeypatch.setattr(workers, "LOG_KEEP_BYTES", 100)
    log = tmp_path / "worker-0.log"
    log.write_bytes(b"noise of an earlier item\n" * 200 + b"the item's last line\n")
    w = SimpleNamespace(log=str(log), log_offset=5000)  # where the item began
    workers.Pool._cap_log(None, w, 1000)
    assert log.stat().st_size < 1000
    assert workers.Pool._item_output(None, w) == "the item's last line"
    w.log_offset = 0
    workers.Pool._cap_log(None, w, 1000)  # under the cap: left alone
    assert "dropped" in log.read_text()