"""Items in worker processes: a crash, a hang or a lost CUDA context costs one row.

The parent hands each worker one case at a time (the case and its implementations, by
reference) and records the rows the worker sends back, one per item, as they finish. A
worker that dies (a signal, an exit, a lost CUDA context) costs the item it was running:
that item is recorded as `error` with the exit status and the last lines the worker wrote
on stderr; one that outlives the item timeout is killed and its item recorded as
`timeout`. Either way a fresh worker takes the case's remaining items, and the run goes
on. Each worker is pinned to one device: on CUDA through CUDA_VISIBLE_DEVICES, set before
the worker imports torch, so that it sees its GPU as cuda:0.

Workers are started with "spawn" (CUDA cannot be used in a forked child) and resolve the
implementations again by name (`suite.registry.resolve`), so an implementation must be
registered or importable as `OP=module:object`; the driver runs plans of other
implementations in its own process.
"""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
import os
import signal
import time
from collections import deque
from dataclasses import dataclass
from multiprocessing.connection import wait
from pathlib import Path
from typing import Optional

from suite.outcomes import FailureKind, Verdict
from suite.plan import CasePlan, Plan
from suite.rows import ResultRow, RunInfo

# A worker exits with this after an item that lost its CUDA context: the parent restarts it.
EXIT_CONTEXT_LOST = 75
# Per profile: long enough for the slowest legitimate item (golden and timing included).
ITEM_TIMEOUT_S = {"smoke": 300.0, "ci": 300.0, "gpu": 600.0, "perf": 900.0, "nightly": 900.0}
DEFAULT_ITEM_TIMEOUT_S = 600.0
STDERR_TAIL_LINES = 8
_START_TIMEOUT_S = 600.0  # importing torch and the registry in a fresh process


def item_timeout(profile: str) -> float:
    return ITEM_TIMEOUT_S.get(profile, DEFAULT_ITEM_TIMEOUT_S)


@dataclass(frozen=True)
class WorkerSetup:
    """What a worker needs to run items as the parent would."""

    opts: object  # suite.runner.RunOptions, with the worker's own view of its device
    run: Optional[RunInfo]
    ceilings: object  # suite.roofline.Ceilings
    cuda_visible: Optional[str]  # CUDA_VISIBLE_DEVICES for the worker; None: leave it
    threads: Optional[int]  # torch intra-op threads on a CPU; None: torch's default
    log: str  # the worker's stderr goes here (appended)


def _worker_main(conn, setup: WorkerSetup) -> None:
    """A worker: run the cases it is sent, one row a message, until told to stop."""
    if setup.cuda_visible is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = setup.cuda_visible
    log = open(setup.log, "a", buffering=1, encoding="utf-8", errors="replace")
    os.dup2(log.fileno(), 2)
    import sys

    sys.stderr = log
    import torch

    from suite import cuda_fault, registry
    from suite.driver import Driver, Each

    if setup.threads:
        torch.set_num_threads(setup.threads)
    driver = Driver(setup.opts, setup.run, setup.ceilings)
    conn.send(("ready",))
    while True:
        task = conn.recv()
        if task is None:
            return
        task_id, op, case_fields, refs = task
        case = _case(case_fields)
        spec = registry.ops()[op]
        impls = []
        for ref in refs:
            impls.append(registry.resolve(op, ref))
        k = {"i": 0}

        def started(i):  # with where its stderr log stands, for the parent's tail of it
            log.flush()
            conn.send(("start", task_id, i, os.fstat(2).st_size))

        def sent(row):
            conn.send(("row", task_id, k["i"], row.to_record()))
            k["i"] += 1
            if cuda_fault.lost_at():  # the rest of the case on a fresh worker
                log.flush()
                os._exit(EXIT_CONTEXT_LOST)
            if k["i"] < len(impls):
                started(k["i"])

        started(0)
        driver.run(Plan((CasePlan(spec, case, tuple(impls)),)), Each(sent))
        conn.send(("done", task_id))


def _case_fields(case) -> dict:
    """A Case as plain values (its params are a read-only view, which does not pickle)."""
    fields = {f.name: getattr(case, f.name) for f in dataclasses.fields(case)}
    fields["params"] = dict(case.params)
    return fields


def _case(fields: dict):
    from types import MappingProxyType

    from suite.cases import Case

    return Case(**{**fields, "params": MappingProxyType(fields["params"])})


@dataclass
class _Task:
    id: int
    entry: CasePlan
    first: int = 0  # the entry's implementations from this index on are still to run

    @property
    def impls(self) -> tuple:
        return self.entry.impls[self.first:]


@dataclass
class _Worker:
    slot: int
    process: object
    conn: object
    device_label: str
    ready: bool = False
    task: Optional[_Task] = None
    item: Optional[int] = None  # index into the task's implementations, in flight
    rows_seen: int = 0  # rows received of the task
    since: float = 0.0  # when the item in flight started
    log_offset: int = 0
    log: str = ""


@dataclass
class PoolOptions:
    workers: int = 1
    devices: tuple = ("cpu",)  # one label a worker slot, e.g. ("cuda:0", "cuda:1")
    item_timeout_s: float = DEFAULT_ITEM_TIMEOUT_S
    log_dir: Optional[Path] = None  # default: a temporary folder
    threads: Optional[int] = None


class Pool:
    """Worker processes running a plan's items; rows go to the sink as they arrive."""

    def __init__(self, opts, run: Optional[RunInfo], ceilings, pool: PoolOptions):
        import tempfile

        self.opts, self.run_info, self.ceilings, self.pool = opts, run, ceilings, pool
        self.ctx = mp.get_context("spawn")
        self.log_dir = Path(pool.log_dir or tempfile.mkdtemp(prefix="bwd-suite-workers-"))
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.workers: list[_Worker] = []

    # ---------------------------------------------------------------- processes

    def _setup(self, slot: int) -> WorkerSetup:
        label = self.pool.devices[slot % len(self.pool.devices)]
        opts, cuda_visible = self.opts, None
        if label.startswith("cuda"):
            import torch

            from suite.gpus import physical_id

            # the worker's one visible GPU is the parent's `index`-th
            index = int(label.partition(":")[2] or "0")
            cuda_visible = physical_id(index, os.environ.get("CUDA_VISIBLE_DEVICES"))
            opts = dataclasses.replace(opts, device=torch.device("cuda", 0),
                                       golden_device=torch.device("cuda", 0)
                                       if opts.golden_device.type == "cuda"
                                       else opts.golden_device)
        log = str(self.log_dir / f"worker-{slot}.log")
        return WorkerSetup(opts, self.run_info, self.ceilings, cuda_visible, self.pool.threads, log)

    def _start(self, slot: int) -> _Worker:
        setup = self._setup(slot)
        parent, child = self.ctx.Pipe()
        proc = self.ctx.Process(target=_worker_main, args=(child, setup), daemon=True,
                                name=f"bwd-suite-worker-{slot}")
        proc.start()
        child.close()
        label = self.pool.devices[slot % len(self.pool.devices)]
        w = _Worker(slot, proc, parent, label, log=setup.log)
        w.since = time.monotonic()
        return w

    def _stop(self, w: _Worker, kill: bool = False) -> None:
        try:
            if not kill and w.process.is_alive():
                w.conn.send(None)
                w.process.join(5)
        except (OSError, EOFError, BrokenPipeError):
            pass
        if w.process.is_alive():
            w.process.kill()
            w.process.join(5)
        w.conn.close()

    # ---------------------------------------------------------------- rows

    def _row_of(self, record: dict, w: _Worker) -> ResultRow:
        row = ResultRow.from_record(record)
        if w.device_label.startswith("cuda"):
            row.device = w.device_label  # the parent's name of the worker's GPU
        return row

    def _lost_row(self, w: _Worker, verdict: Verdict, kind: FailureKind, why: str) -> ResultRow:
        """The row of the item in flight when its worker died or was killed."""
        from suite.runner import _row

        entry = w.task.entry
        impl = w.task.impls[w.item]
        row = _row(self.run_info, entry.case, impl, entry.spec,
                   "cuda" if w.device_label.startswith("cuda") else "cpu")
        row.finish(verdict, why, kind, duration_s=time.monotonic() - w.since)
        if w.device_label.startswith("cuda"):
            row.device = w.device_label
        return row

    def _stderr_tail(self, w: _Worker) -> str:
        try:
            with open(w.log, "rb") as f:
                f.seek(w.log_offset)
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return ""
        lines = [ln for ln in text.strip().splitlines() if ln.strip()]
        return " | ".join(lines[-STDERR_TAIL_LINES:])

    def _log_size(self, w: _Worker) -> int:
        try:
            return os.path.getsize(w.log)
        except OSError:
            return 0

    @staticmethod
    def _exit_words(code: Optional[int]) -> str:
        if code is None:
            return "still running"
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"killed by {name} (exit status {code})"
        if code == EXIT_CONTEXT_LOST:
            return "lost its CUDA context"
        return f"exited with status {code}"

    # ---------------------------------------------------------------- the loop

    def run(self, plan: Plan, sink) -> None:
        tasks = deque(_Task(i, e) for i, e in enumerate(plan))
        n = max(1, min(self.pool.workers, len(tasks) or 1))
        self.workers = [self._start(slot) for slot in range(n)]
        try:
            self._loop(tasks, sink)
        finally:
            for w in self.workers:
                self._stop(w, kill=w.task is not None)
            self._drop_empty_logs()

    def _drop_empty_logs(self) -> None:
        """Keep the workers' logs only where they wrote something."""
        for log in self.log_dir.glob("worker-*.log"):
            if log.stat().st_size == 0:
                log.unlink()
        try:
            self.log_dir.rmdir()  # only when empty
        except OSError:
            pass

    def _give(self, w: _Worker, tasks: deque) -> None:
        task = tasks.popleft()
        w.task, w.item, w.rows_seen = task, None, 0
        w.log_offset = self._log_size(w)
        refs = [i.origin or i.name for i in task.impls]
        w.conn.send((task.id, task.entry.spec.name, _case_fields(task.entry.case), refs))
        w.since = time.monotonic()

    def _replace(self, w: _Worker, tasks: deque, resume_from: Optional[int]) -> None:
        """Restart a worker's slot; the rest of its task (after the lost item) goes first."""
        if w.task is not None and resume_from is not None:
            rest = _Task(w.task.id, w.task.entry, w.task.first + resume_from)
            if rest.impls:
                tasks.appendleft(rest)
        self._stop(w, kill=True)
        self.workers[self.workers.index(w)] = self._start(w.slot)

    def _loop(self, tasks: deque, sink) -> None:
        while tasks or any(w.task is not None for w in self.workers):
            for w in self.workers:
                if w.ready and w.task is None and tasks:
                    self._give(w, tasks)
            conns = {w.conn: w for w in self.workers}
            ready = wait(list(conns), timeout=self._wait_s())
            for c in ready:
                w = conns[c]
                try:
                    msg = c.recv()
                except (EOFError, OSError):
                    self._died(w, tasks, sink)
                    continue
                self._handle(w, msg, tasks, sink)
            self._check_clocks(tasks, sink)

    def _wait_s(self) -> float:
        now, left = time.monotonic(), [1.0]
        for w in self.workers:
            if w.task is not None and w.item is not None:
                left.append(self.pool.item_timeout_s - (now - w.since))
        return max(0.01, min(left))

    def _handle(self, w: _Worker, msg: tuple, tasks: deque, sink) -> None:
        kind = msg[0]
        if kind == "ready":
            w.ready = True
        elif kind == "start":
            w.item, w.since, w.log_offset = msg[2], time.monotonic(), msg[3]
        elif kind == "row":
            sink.add(self._row_of(msg[3], w))
            w.item, w.rows_seen = None, w.rows_seen + 1
        elif kind == "done":
            w.task, w.item = None, None

    def _died(self, w: _Worker, tasks: deque, sink) -> None:
        w.process.join(5)
        words = self._exit_words(w.process.exitcode)
        tail = self._stderr_tail(w)
        if w.task is not None and w.item is not None:
            why = f"worker died: {words}" + (f"; last on stderr: {tail}" if tail else "")
            sink.add(self._lost_row(w, Verdict.ERROR, FailureKind.WORKER_DIED, why))
            self._replace(w, tasks, w.item + 1)
        elif w.task is not None:  # died between items: nothing in flight is lost
            self._replace(w, tasks, w.rows_seen)
        elif not w.ready:
            raise RuntimeError(f"a worker process could not start ({words})"
                               + (f": {tail}" if tail else f"; see {w.log}"))
        else:
            self._replace(w, tasks, None)

    def _check_clocks(self, tasks: deque, sink) -> None:
        now = time.monotonic()
        for w in list(self.workers):
            if not w.ready and now - w.since > _START_TIMEOUT_S:
                raise RuntimeError(f"a worker process did not start within "
                                   f"{_START_TIMEOUT_S:.0f} s; see {w.log}")
            if w.task is None or w.item is None:
                continue
            if now - w.since > self.pool.item_timeout_s:
                why = (f"timeout: still running after {self.pool.item_timeout_s:g} s "
                       f"(--item-timeout); its worker was killed")
                sink.add(self._lost_row(w, Verdict.TIMEOUT, FailureKind.TIMEOUT, why))
                self._replace(w, tasks, w.item + 1)
