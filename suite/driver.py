"""The run driver: executes a plan (suite/plan.py) with options and hands every row to a
sink as it finishes.

Every entry point runs items through `Driver.run`: the `run` command (sinks: the parquet
writer and the progress lines), the pytest plugin (one item a call; its sink keeps the row
for the verdict), `mutants` (a table of rows) and scripts/kernel_variants.py. Per case
the inputs and float64 golden are built once and shared by its implementations
(suite/runner.py does one case).
"""

from __future__ import annotations

from typing import Callable, Iterable, Optional, Protocol

from bwd_suite.suite.plan import Plan
from bwd_suite.suite.roofline import Ceilings, no_ceilings
from bwd_suite.suite.rows import ResultRow, RunInfo
from bwd_suite.suite.runner import ContextCache, RunOptions, run_case


class Sink(Protocol):
    """Where rows go as they finish."""

    def add(self, row: ResultRow) -> None: ...


class Rows(list):
    """A sink that keeps the rows, in order."""

    def add(self, row: ResultRow) -> None:
        self.append(row)


class Tee:
    """A sink that hands each row to several sinks, in order."""

    def __init__(self, *sinks: Sink):
        self.sinks = sinks

    def add(self, row: ResultRow) -> None:
        for s in self.sinks:
            s.add(row)


class Each:
    """A sink that calls `fn(row)` for each row."""

    def __init__(self, fn: Callable[[ResultRow], object]):
        self.fn = fn

    def add(self, row: ResultRow) -> None:
        self.fn(row)


class Driver:
    """Runs plans under one set of options, for one run (its RunInfo columns on every row;
    None leaves them empty, as pytest items have no run). With `pool`, items run in worker
    processes (suite/workers.py), kept from one plan to the next until `close` (or the end
    of a `with` block); without, in this process."""

    def __init__(self, opts: RunOptions, run: Optional[RunInfo] = None,
                 ceilings: Optional[Ceilings] = None, pool=None):
        self.opts = opts
        self.run_info = run
        self.ceilings = ceilings if ceilings is not None else no_ceilings(opts.device)
        self.pool = pool  # suite.workers.PoolOptions, or None
        self._workers = None  # the suite.workers.Pool, once started
        # kept across calls, so that one-item plans of the same case share its golden
        self._contexts = ContextCache()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        """Stop the worker processes, if any."""
        if self._workers is not None:
            self._workers.close()
            self._workers = None

    def run(self, plan: Plan, sink: Sink) -> None:
        if self.pool is not None and self.pool.workers > 0:
            from bwd_suite.suite.workers import Pool

            _check_resolvable(plan)
            if self._workers is None:
                self._workers = Pool(self.opts, self.run_info, self.ceilings, self.pool)
            self._workers.run(plan, sink)
            return
        for entry in plan:
            for row in run_case(entry.spec, entry.case, list(entry.impls), self.opts,
                                self.run_info, self.ceilings, self._contexts):
                sink.add(row)

    def rows(self, plan: Plan) -> Rows:
        """Run the plan and return its rows."""
        out = Rows()
        self.run(plan, out)
        return out


def _check_resolvable(plan: Plan) -> None:
    """Worker processes find implementations again by name: refuse ones they cannot."""
    from bwd_suite.suite import registry

    for entry in plan:
        for impl in entry.impls:
            if not registry.resolvable(impl):
                raise ValueError(f"implementation {impl.op}/{impl.name} is neither registered "
                                 f"nor loaded as OP=module:object: worker processes cannot "
                                 f"find it (run it without workers)")


def count_bad(rows: Iterable[ResultRow]) -> int:
    """Items that make a run exit 1: undeclared failures, errors and timeouts, and
    unexpected passes of declared failures."""
    return sum(r.counts_against for r in rows)
