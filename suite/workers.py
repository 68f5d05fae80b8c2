"""Items in worker processes: a crash, a hang or a lost CUDA context costs one row.

The parent hands each worker one case at a time (the case and its implementations, by
reference) and records the rows the worker sends back, one per item, as they finish. A
worker that dies (a signal, an exit, a lost CUDA context) costs the item it was running:
that item is recorded as `error` with the exit status and the last lines the item wrote;
one that outlives the item timeout is killed and its item recorded as `timeout`. Either
way a fresh worker takes the case's remaining items, and the run goes on. Each worker is
pinned to one device: on CUDA through CUDA_VISIBLE_DEVICES, set before the worker imports
torch, so that it sees its GPU as cuda:0.

What the run trusts of a worker, and what it does not:
- Messages come back as length-prefixed JSON frames (suite/frames.py), checked against
  what the parent asked for; bytes that are not such a frame cost the worker's item, and
  nothing a worker sends is unpickled.
- A worker loads each implementation just before its item and says so first: one whose
  module raises there is `error` (not loaded) for all its items, and one whose worker dies
  loading it MAX_LOAD_DEATHS times likewise; every death is charged to an item or an
  implementation, so no worker restarts forever.
- Workers die with the run (PR_SET_PDEATHSIG, and a watchdog of the parent's pid), each
  leads its own process group, which the parent kills with it (forks an implementation
  left behind), and a fork of an implementation never sends a row.
- What implementations print (stdout and stderr, C code's too) goes to the worker's log,
  never to the run's output; each row keeps the tail of what its item wrote (`output`).
  The worker cuts its own log back to its tail past LOG_CAP_BYTES (suite/worker_log.py);
  the parent cuts only a log its worker failed to keep (past LOG_HARD_CAP_FACTOR times
  that) and, after the run, every log.

Workers are started with "spawn" (CUDA cannot be used in a forked child) and resolve the
implementations again by name (`suite.registry.resolve`), so an implementation must be
registered or importable as `OP=module:object`; the driver runs plans of other
implementations in its own process. A pool outlives one plan: `fuzz` runs its drawn cases
and then each shrinking step through the same workers.
"""

from __future__ import annotations

import dataclasses
import errno
import multiprocessing as mp
import os
import signal
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from pathlib import Path
from typing import Optional

from bwd_suite.suite import frames
from bwd_suite.suite.outcomes import FailureKind, Verdict
from bwd_suite.suite.plan import CasePlan, Plan
from bwd_suite.suite.rows import ResultRow, RunInfo
from bwd_suite.suite.worker_log import OUTPUT_TAIL_CHARS, WorkerLog, cut_log, read_tail

# A worker exits with these after an item that lost its CUDA context or ran out of memory:
# the parent restarts it (nobody's fault) and the case's other items go on
EXIT_CONTEXT_LOST = 75
EXIT_OUT_OF_MEMORY = 76
# Per profile: long enough for the slowest legitimate item (golden and timing included).
ITEM_TIMEOUT_S = {"smoke": 300.0, "ci": 300.0, "gpu": 600.0, "perf": 900.0, "nightly": 900.0}
DEFAULT_ITEM_TIMEOUT_S = 600.0
_START_TIMEOUT_S = 600.0  # importing torch and the registry in a fresh process
# deaths of a worker while loading one implementation before its items are given up
MAX_LOAD_DEATHS = 2
# worker deaths in a row charged to no item and no implementation (before it was ready,
# or idle): the harness cannot run here
MAX_FRUITLESS_DEATHS = 3
# the last lines of what an item wrote that a worker death's reason quotes
REASON_TAIL_LINES = 8
# a worker's log is cut back to its last LOG_KEEP_BYTES when it passes LOG_CAP_BYTES (by
# the worker); the parent cuts one past LOG_HARD_CAP_FACTOR x LOG_CAP_BYTES (a worker whose
# watchdog thread cannot run), where an item's output may then be misattributed
LOG_CAP_BYTES, LOG_KEEP_BYTES, LOG_HARD_CAP_FACTOR = 8 << 20, 256 << 10, 16
_READ_CHUNK = 1 << 16


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
    log: str  # the worker's stdout and stderr go here (appended)
    parent_pid: int = 0
    log_cap_bytes: int = LOG_CAP_BYTES
    log_keep_bytes: int = LOG_KEEP_BYTES


# ---------------------------------------------------------------- the worker process

def _set_death_signal() -> None:
    """Ask Linux to kill this process when the process that started it dies."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: the watchdog thread alone


def _watch_parent(parent_pid: int) -> None:
    """End this worker when the run is gone (where PR_SET_PDEATHSIG is missing)."""
    import threading

    def watch():
        while True:
            if os.getppid() != parent_pid:
                os._exit(1)
            time.sleep(1.0)

    threading.Thread(target=watch, name="bwd-suite-parent-watch", daemon=True).start()


class _Sender:
    """Frames to the parent, from the worker process only: a fork of an implementation
    that reaches a send exits there instead, so it never produces a row."""

    def __init__(self, fd: int):
        import threading

        self.fd, self.pid = fd, os.getpid()
        self.lock = threading.Lock()  # the log's watchdog thread sends too

    def __call__(self, **message) -> None:
        if os.getpid() != self.pid:
            os._exit(0)
        data = frames.encode(message)
        with self.lock:
            frames.write_all(self.fd, data)


def _worker_main(tasks, messages, setup: WorkerSetup) -> None:
    """A worker: run the cases it is sent, one frame a message, until told to stop."""
    if setup.parent_pid:
        _set_death_signal()
        if os.getppid() != setup.parent_pid:  # the run died before the signal was set
            os._exit(1)
        _watch_parent(setup.parent_pid)
    os.setpgrp()  # the parent kills the group: forks an implementation leaves behind too
    os.register_at_fork(after_in_child=_set_death_signal)
    if setup.cuda_visible is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = setup.cuda_visible
    import sys

    log = os.open(setup.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    for fd in (1, 2):  # an implementation's output, C code's included, never reaches the run
        os.dup2(log, fd)
    for stream in (sys.stdout, sys.stderr):
        stream.reconfigure(line_buffering=True, errors="replace")
    send = _Sender(messages.fileno())
    wlog = WorkerLog(setup.log, setup.log_cap_bytes, setup.log_keep_bytes, send)
    wlog.start_watchdog()

    import torch

    from bwd_suite.suite import cuda_fault, memory, registry, results
    from bwd_suite.suite.errors import SuiteInputError
    from bwd_suite.suite.runner import ContextCache, run_case
    from bwd_suite.suite.roofline import no_ceilings

    if setup.threads:
        torch.set_num_threads(setup.threads)
    ceilings = setup.ceilings if setup.ceilings is not None else no_ceilings(setup.opts.device)
    contexts = ContextCache()  # the case's inputs and golden, for each of its items

    send(m="ready", pid=os.getpid())
    while True:
        task = tasks.recv()  # pickled by the parent, which the worker trusts
        if task is None:
            return
        task_id, op, case_fields, refs = task
        case = _case(case_fields)
        spec = registry.ops()[op]
        for i, ref in refs:
            send(m="load", task=task_id, i=i)
            try:
                impl = registry.resolve(op, ref)
            except BaseException as e:  # noqa: BLE001 - SystemExit of a module too
                why = e.what if isinstance(e, SuiteInputError) else f"{type(e).__name__}: {e}"
                send(m="load_failed", task=task_id, i=i, reason=why[:OUTPUT_TAIL_CHARS])
                continue
            wlog.begin(task=task_id, i=i)
            (row,) = run_case(spec, case, [impl], setup.opts, setup.run, ceilings, contexts)
            send(m="row", task=task_id, i=i, row=results.storable_record(row),
                 output=wlog.end())
            if cuda_fault.lost_at():  # the rest of the case on a fresh worker
                os._exit(EXIT_CONTEXT_LOST)
            if memory.oom_seen():  # the allocator may keep what it held: start clean
                os._exit(EXIT_OUT_OF_MEMORY)
        send(m="done", task=task_id)


def _case_fields(case) -> dict:
    """A Case as plain values (its params are a read-only view, which does not pickle)."""
    fields = {f.name: getattr(case, f.name) for f in dataclasses.fields(case)}
    fields["params"] = dict(case.params)
    return fields


def _case(fields: dict):
    from types import MappingProxyType

    from bwd_suite.suite.cases import Case

    return Case(**{**fields, "params": MappingProxyType(fields["params"])})


# ---------------------------------------------------------------- the parent's records

@dataclass
class _Task:
    id: int
    entry: CasePlan
    pending: list  # indices into entry.impls still without a row, in order


@dataclass(eq=False)
class _Worker:
    slot: int
    process: object
    tasks: object  # the parent's end of the task pipe
    messages: int  # the parent's end of the message pipe (a raw fd, read non-blocking)
    device_label: str
    log: str
    reader: frames.FrameReader = field(default_factory=frames.FrameReader)
    ready: bool = False
    task: Optional[_Task] = None
    loading: Optional[int] = None  # implementation index being loaded
    item: Optional[int] = None  # implementation index whose item is in flight
    last: Optional[int] = None  # the last index it sent a row for, in this task
    since: float = 0.0  # when the load or item in flight started
    log_offset: int = 0
    corrupt: str = ""  # why its stream was refused
    closed: bool = False  # its message pipe reached end of file


@dataclass
class PoolOptions:
    workers: int = 1
    devices: tuple = ("cpu",)  # one label a worker slot, e.g. ("cuda:0", "cuda:1")
    item_timeout_s: float = DEFAULT_ITEM_TIMEOUT_S
    log_dir: Optional[Path] = None  # default: a temporary folder
    threads: Optional[int] = None


def impl_key(impl) -> tuple:
    return (impl.op, impl.origin or impl.name)


class Pool:
    """Worker processes running plans' items; rows go to the sink as they arrive. Started
    on the first `run`, kept for the next ones, stopped by `close` (or leaving `with`)."""

    def __init__(self, opts, run: Optional[RunInfo], ceilings, pool: PoolOptions):
        import tempfile

        self.opts, self.run_info, self.ceilings, self.pool = opts, run, ceilings, pool
        self.ctx = mp.get_context("spawn")
        self.log_dir = Path(pool.log_dir or tempfile.mkdtemp(prefix="bwd-suite-workers-"))
        self.workers: list[_Worker] = []
        self.broken: dict = {}  # impl_key -> why its items are not run
        self.load_deaths: Counter = Counter()  # impl_key -> worker deaths while loading it
        self.fruitless = 0  # deaths in a row charged to nothing (MAX_FRUITLESS_DEATHS)
        self.harness_failure = ""  # why no worker can run anything
        self._next_task = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---------------------------------------------------------------- processes

    def _setup(self, slot: int) -> WorkerSetup:
        label = self.pool.devices[slot % len(self.pool.devices)]
        opts, cuda_visible = self.opts, None
        if label.startswith("cuda"):
            import torch

            from bwd_suite.suite.gpus import physical_id

            # the worker's one visible GPU is the parent's `index`-th
            index = int(label.partition(":")[2] or "0")
            cuda_visible = physical_id(index, os.environ.get("CUDA_VISIBLE_DEVICES"))
            opts = dataclasses.replace(opts, device=torch.device("cuda", 0),
                                       golden_device=torch.device("cuda", 0)
                                       if opts.golden_device.type == "cuda"
                                       else opts.golden_device)
        log = str(self.log_dir / f"worker-{slot}.log")
        return WorkerSetup(opts, self.run_info, self.ceilings, cuda_visible, self.pool.threads,
                           log, os.getpid(), LOG_CAP_BYTES, LOG_KEEP_BYTES)

    def _start(self, slot: int) -> _Worker:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        setup = self._setup(slot)
        task_r, task_w = self.ctx.Pipe(duplex=False)
        msg_r, msg_w = self.ctx.Pipe(duplex=False)
        proc = self.ctx.Process(target=_worker_main, args=(task_r, msg_w, setup), daemon=True,
                                name=f"bwd-suite-worker-{slot}")
        proc.start()
        task_r.close()
        msg_w.close()
        fd = os.dup(msg_r.fileno())  # read raw: frames.FrameReader, never .recv (pickle)
        msg_r.close()
        os.set_blocking(fd, False)
        w = _Worker(slot, proc, task_w, fd, self.pool.devices[slot % len(self.pool.devices)],
                    setup.log)
        w.since = time.monotonic()
        return w

    def _kill_group(self, w: _Worker) -> None:
        try:
            os.killpg(w.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError, OSError):
            pass

    def _stop(self, w: _Worker, kill: bool = False) -> None:
        try:
            if not kill and w.process.is_alive():
                w.tasks.send(None)
                w.process.join(5)
        except (OSError, EOFError, BrokenPipeError, ValueError):
            pass
        self._kill_group(w)  # what its implementations forked, and the worker if still up
        w.process.join(5)
        try:
            w.process.close()  # its sentinel's descriptor: a long fuzz restarts many workers
        except ValueError:
            pass
        for close in (w.tasks.close, lambda: os.close(w.messages)):
            try:
                close()
            except OSError:
                pass

    def close(self) -> None:
        """Stop every worker (and what its implementations left running); keep the logs
        that hold something."""
        for w in self.workers:
            self._stop(w, kill=w.task is not None)
            self._cap_log(w, LOG_CAP_BYTES)
        self.workers = []
        self._drop_empty_logs()

    def _drop_empty_logs(self) -> None:
        """Keep the workers' logs only where they wrote something."""
        if not self.log_dir.exists():
            return
        for log in self.log_dir.glob("worker-*.log"):
            if log.stat().st_size == 0:
                log.unlink()
        try:
            self.log_dir.rmdir()  # only when empty
        except OSError:
            pass

    # ---------------------------------------------------------------- rows

    def _row_of(self, record, w: _Worker) -> ResultRow:
        """A worker's row, checked: a record of the schema, of the item asked for."""
        from bwd_suite.suite.results import SCHEMA

        if not isinstance(record, dict) or set(record) - set(SCHEMA.names):
            raise frames.CorruptStream("a row that is not a record of the results schema")
        try:
            row = ResultRow.from_record(record)
        except (TypeError, ValueError) as e:
            raise frames.CorruptStream(f"a row the schema refuses ({e})") from None
        entry, impl = w.task.entry, w.task.entry.impls[w.item]
        if (row.op, row.case_id, row.impl) != (entry.spec.name, entry.case.id, impl.name) \
                or row.verdict is None:
            raise frames.CorruptStream(f"a row of another item ({row.op} {row.case_id} "
                                       f"[{row.impl}])")
        if w.device_label.startswith("cuda"):
            row.device = w.device_label  # the parent's name of the worker's GPU
        return row

    def _new_row(self, entry: CasePlan, index: int, device_label: str, verdict: Verdict,
                 kind: FailureKind, why: str, duration_s: float = 0.0) -> ResultRow:
        """A row the parent writes itself (the worker could not)."""
        from bwd_suite.suite.runner import item_row

        row = item_row(self.run_info, entry.case, entry.impls[index], entry.spec,
                   "cuda" if device_label.startswith("cuda") else "cpu")
        row.finish(verdict, why, kind, duration_s=duration_s)
        if device_label.startswith("cuda"):
            row.device = device_label
        return row

    def _item_output(self, w: _Worker) -> str:
        """What the worker wrote since the item in flight started (its tail), for an item
        its worker could not finish (a death, a timeout); a finished item's row brings its
        own (WorkerLog.end)."""
        try:
            return read_tail(w.log, w.log_offset)
        except OSError:
            return ""

    def _cap_log(self, w: _Worker, cap: int) -> None:
        """Cut a log past `cap` bytes back to its tail. With the worker alive this races
        with its own cuts and sizes: only for a log it failed to keep (see LOG_CAP_BYTES)."""
        try:
            if os.path.getsize(w.log) <= cap:
                return
            w.log_offset = cut_log(w.log, LOG_KEEP_BYTES, w.log_offset)
        except OSError:
            pass

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
        if code == EXIT_OUT_OF_MEMORY:
            return "restarted after running out of memory"
        return f"exited with status {code}"

    # ---------------------------------------------------------------- the loop

    def run(self, plan: Plan, sink) -> None:
        """Every item of `plan`, each row to `sink` as it arrives. An exception (the sink
        stopping the run, Ctrl-C) stops the workers; the next run starts fresh ones."""
        tasks = deque()
        for entry in plan:
            tasks.append(_Task(self._next_task, entry, list(range(len(entry.impls)))))
            self._next_task += 1
        want = max(1, min(self.pool.workers, len(tasks) or 1))
        try:
            while len(self.workers) < want and not self.harness_failure:
                self.workers.append(self._start(len(self.workers)))
            self._loop(tasks, sink)
        except BaseException:
            self.close()
            raise

    def _give(self, w: _Worker, tasks: deque, sink) -> None:
        """The next task's items to `w`; those of broken implementations are recorded
        here, without a worker."""
        task = tasks.popleft()
        entry = task.entry
        for i in list(task.pending):
            why = self.broken.get(impl_key(entry.impls[i]))
            if why:
                sink.add(self._new_row(entry, i, w.device_label, Verdict.ERROR,
                                       FailureKind.NOT_LOADED, why))
                task.pending.remove(i)
        if not task.pending:
            return
        w.task, w.item, w.loading, w.last = task, None, None, None
        refs = [(i, entry.impls[i].origin or entry.impls[i].name) for i in task.pending]
        w.tasks.send((task.id, entry.spec.name, _case_fields(entry.case), refs))
        w.since = time.monotonic()

    def _requeue(self, w: _Worker, tasks: deque) -> None:
        """What is left of a worker's task goes first, to the next worker free."""
        if w.task is not None and w.task.pending:
            tasks.appendleft(w.task)
        w.task = None

    def _replace(self, w: _Worker) -> None:
        self._stop(w, kill=True)
        self.workers[self.workers.index(w)] = self._start(w.slot)

    def _loop(self, tasks: deque, sink) -> None:
        while tasks or any(w.task is not None for w in self.workers):
            if self.harness_failure:
                self._fail_all(tasks, sink)
                return
            for w in self.workers:
                while w.ready and w.task is None and tasks:
                    self._give(w, tasks, sink)
            by_fd = {w.messages: w for w in self.workers}
            by_sentinel = {w.process.sentinel: w for w in self.workers}
            ready = wait(list(by_fd) + list(by_sentinel), timeout=self._wait_s())
            for r in ready:
                if r in by_fd:
                    self._read(by_fd[r], tasks, sink)
            for r in ready:  # exits after the bytes they sent before dying
                w = by_sentinel.get(r)
                if w is not None and w in self.workers:
                    self._read(w, tasks, sink)
                    if w in self.workers:
                        self._died(w, tasks, sink)
            for w in list(self.workers):
                if w.corrupt:
                    self._died(w, tasks, sink)
            self._check_clocks(tasks, sink)

    def _read(self, w: _Worker, tasks: deque, sink) -> None:
        """Everything waiting on the worker's pipe, message by message."""
        while not w.corrupt and not w.closed:
            try:
                data = os.read(w.messages, _READ_CHUNK)
            except BlockingIOError:
                return
            except OSError as e:
                if e.errno == errno.EINTR:
                    continue
                w.closed = True
                return
            if not data:
                w.closed = True
                return
            try:
                for message in w.reader.feed(data):
                    self._handle(w, message, tasks, sink)
            except frames.CorruptStream as e:
                w.corrupt = str(e)
                self._kill_group(w)

    def _wait_s(self) -> float:
        now, left = time.monotonic(), [1.0]
        for w in self.workers:
            if w.task is not None and (w.item is not None or w.loading is not None):
                left.append(self.pool.item_timeout_s - (now - w.since))
        return max(0.01, min(left))

    def _expect(self, w: _Worker, message: dict, *fields) -> tuple:
        """The message's fields, checked against the task in flight."""
        values = []
        for name in fields:
            v = message.get(name)
            if name == "task" and (w.task is None or v != w.task.id):
                raise frames.CorruptStream(f"a message of task {v!r}, not the one in flight")
            if name == "i" and (w.task is None or not isinstance(v, int)
                                or isinstance(v, bool) or v not in w.task.pending):
                raise frames.CorruptStream(f"a message of item {v!r}, not one pending")
            values.append(v)
        return tuple(values)

    def _handle(self, w: _Worker, message: dict, tasks: deque, sink) -> None:
        kind = message.get("m")
        now = time.monotonic()
        if kind == "ready" and not w.ready:
            w.ready, w.since = True, now
        elif kind == "load":
            _, i = self._expect(w, message, "task", "i")
            w.loading, w.item, w.since = i, None, now
        elif kind == "load_failed":
            _, i, reason = self._expect(w, message, "task", "i", "reason")
            impl = w.task.entry.impls[i]
            why = (f"not loaded: {impl.origin or impl.name} cannot be loaded in a worker "
                   f"process: {str(reason)[:OUTPUT_TAIL_CHARS]}")
            self.broken[impl_key(impl)] = why
            sink.add(self._new_row(w.task.entry, i, w.device_label, Verdict.ERROR,
                                   FailureKind.NOT_LOADED, why))
            w.task.pending.remove(i)
            w.loading = None
        elif kind == "log_cut":  # the worker cut its log during the item in flight
            start = message.get("start")
            if w.item is None or not isinstance(start, int) or isinstance(start, bool) \
                    or start < 0:
                raise frames.CorruptStream(f"a log cut at {str(start)[:40]!r} with item "
                                           f"{w.item} in flight")
            w.log_offset = start
        elif kind == "start":
            _, i, offset = self._expect(w, message, "task", "i", "log")
            if i != w.loading:
                raise frames.CorruptStream(f"item {i} started while loading {w.loading}")
            w.loading, w.item, w.since = None, i, now
            w.log_offset = offset if isinstance(offset, int) and offset >= 0 else 0
        elif kind == "row":
            _, i = self._expect(w, message, "task", "i")
            if i != w.item:
                raise frames.CorruptStream(f"a row of item {i} while {w.item} is in flight")
            row = self._row_of(message.get("row"), w)
            out = message.get("output")
            row.output = out[-OUTPUT_TAIL_CHARS:] if isinstance(out, str) and out else None
            sink.add(row)
            w.task.pending.remove(i)
            w.item, w.last = None, i
            self.fruitless = 0
        elif kind == "done":
            self._expect(w, message, "task")
            if w.task.pending:
                raise frames.CorruptStream(f"task done with items {w.task.pending} without rows")
            w.task, w.item, w.loading = None, None, None
        else:
            raise frames.CorruptStream(f"an unknown message {str(kind)[:40]!r}")

    def _died(self, w: _Worker, tasks: deque, sink) -> None:
        """Charge a worker's death to its item, or to the implementation it was loading,
        then start a fresh one; the task's other items go on."""
        if w.corrupt:
            self._kill_group(w)
        w.process.join(5)
        code = w.process.exitcode
        words = (f"sent the run bytes that are not its messages ({w.corrupt}): killed"
                 if w.corrupt else self._exit_words(code))
        out = self._item_output(w)
        tail = " | ".join(out.splitlines()[-REASON_TAIL_LINES:])
        said = f"; last output: {tail}" if tail else ""
        planned = code in (EXIT_CONTEXT_LOST, EXIT_OUT_OF_MEMORY) and not w.corrupt
        charged = True
        if w.task is not None and w.item is not None:
            row = self._new_row(w.task.entry, w.item, w.device_label, Verdict.ERROR,
                                FailureKind.WORKER_DIED, f"worker died: {words}{said}",
                                time.monotonic() - w.since)
            row.output = out or None
            sink.add(row)
            w.task.pending.remove(w.item)
        elif w.task is not None and not planned:
            # loading an implementation, or between its items: charged to it
            i = w.loading if w.loading is not None else w.last
            if i is not None:
                self._load_death(w, i, words, said, sink)
            else:
                charged = False
        elif not planned:
            charged = False
        if not charged:
            self.fruitless += 1
            if self.fruitless >= MAX_FRUITLESS_DEATHS:
                where = "before it was ready" if not w.ready else "between tasks"
                self.harness_failure = (f"harness: worker processes keep dying {where} "
                                        f"({self.fruitless} in a row, the last {words}"
                                        f"{said}; log: {w.log})")
        self._requeue(w, tasks)
        if self.harness_failure:
            self._stop(w, kill=True)
            self.workers.remove(w)
            return
        self._replace(w)

    def _load_death(self, w: _Worker, i: int, words: str, said: str, sink) -> None:
        """A death while loading implementation i (or right after its item): after
        MAX_LOAD_DEATHS its items are not run any more, here and in later tasks."""
        impl = w.task.entry.impls[i]
        key = impl_key(impl)
        self.load_deaths[key] += 1
        n = self.load_deaths[key]
        if n < MAX_LOAD_DEATHS or key in self.broken:
            return
        why = (f"not loaded: its worker died {n} times while loading "
               f"{impl.origin or impl.name} ({words}{said})")
        self.broken[key] = why
        if i in w.task.pending:
            sink.add(self._new_row(w.task.entry, i, w.device_label, Verdict.ERROR,
                                   FailureKind.NOT_LOADED, why))
            w.task.pending.remove(i)

    def _fail_all(self, tasks: deque, sink) -> None:
        """No worker can start: every item left is the harness's error row."""
        for w in self.workers:
            self._requeue(w, tasks)
        for task in tasks:
            for i in task.pending:
                sink.add(self._new_row(task.entry, i, self.pool.devices[0], Verdict.ERROR,
                                       FailureKind.HARNESS, self.harness_failure))
        tasks.clear()

    def _check_clocks(self, tasks: deque, sink) -> None:
        now = time.monotonic()
        for w in list(self.workers):
            self._cap_log(w, LOG_HARD_CAP_FACTOR * LOG_CAP_BYTES)
            if not w.ready and now - w.since > _START_TIMEOUT_S:
                self.harness_failure = (f"harness: a worker process did not start within "
                                        f"{_START_TIMEOUT_S:.0f} s; see {w.log}")
                return
            if w.task is None or (w.item is None and w.loading is None):
                continue
            if now - w.since > self.pool.item_timeout_s:
                if w.item is not None:
                    why = (f"timeout: still running after {self.pool.item_timeout_s:g} s "
                           f"(--item-timeout); its worker was killed")
                    row = self._new_row(w.task.entry, w.item, w.device_label, Verdict.TIMEOUT,
                                        FailureKind.TIMEOUT, why, now - w.since)
                    row.output = self._item_output(w) or None
                    sink.add(row)
                    w.task.pending.remove(w.item)
                else:
                    self._load_death(w, w.loading, f"still loading after "
                                     f"{self.pool.item_timeout_s:g} s: killed", "", sink)
                self._requeue(w, tasks)
                self._replace(w)
