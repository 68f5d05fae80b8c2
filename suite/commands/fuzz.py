"""Fuzz one implementation: cases drawn from the op's parameter domains, run like any
run, every distinct failure shrunk to a minimal case and printed as a case-file block.

Cases are drawn deterministically from --seed within a size profile (--size small: a few
thousand elements, CPU seconds; gpu: up to millions), skipping combinations the op
refuses, keeps out of fuzzing on this device (its fuzz bounds: degenerate data, or a
yardstick wrong by itself) or the implementation cannot run; they run through the driver (worker processes
as `run`; --workers 0 in this process), rows to one parquet file (profile "fuzz"). The
drawing stops after --budget cases or --time seconds. Each distinct failure (same
verdict, failure kind and first failing output; never the harness's own errors) is shrunk
from its smallest failing case through the same worker processes, so an implementation
that crashes costs rows, never the fuzz command; at most --shrink-tries items each. The
minimal case's row is added to the same results file (tags fuzz, shrunk) and its block
printed on stdout. --time bounds the whole command: the drawing stops --shrink-time
seconds before it (a quarter of --time by default), and shrinking stops at it, printing
the smallest case found so far.

Exit status: 0 when nothing failed, 1 when failures were found (their blocks printed),
2 on bad input (before anything runs), 130 when interrupted (finished rows are kept).
More in docs/fuzz.md.
"""

from __future__ import annotations

import math
import sys
import time

HELP = "draw cases from the parameter domains, run them, shrink each failure to a minimal case"
DEFAULT_BUDGET = 100
TIME_ONLY_BUDGET = 10_000_000  # cases at most when only --time bounds the run
ROUND = 500  # under --time, cases are drawn and run in rounds: ROUND, then doubling the total
DEFAULT_SHRINK_TRIES = 200
MISSES = 10_000  # draws in a row that are all skipped: the domains hold nothing runnable


def add_arguments(p) -> None:
    from bwd_suite.suite.cli import add_results_options
    from bwd_suite.suite.commands.run import add_threads_option
    from bwd_suite.suite.fuzz.sizes import SIZES

    g = p.add_argument_group("what to fuzz")
    g.add_argument("--op", metavar="OP", required=True, help="the op")
    g.add_argument("--impl", metavar="NAME", required=True,
                   help="one implementation of the op (a mutant too), or "
                        "[OP=]package.module:object")
    g.add_argument("--device", metavar="DEV",
                   help="torch device (default: cuda when available, else cpu)")
    g = p.add_argument_group("drawing")
    g.add_argument("--budget", type=int, metavar="N",
                   help=f"run N drawn cases (default {DEFAULT_BUDGET} without --time)")
    g.add_argument("--time", type=float, metavar="S",
                   help="the whole command's time, shrinking included: drawing stops "
                        "--shrink-time before it (with --budget: whichever comes first)")
    g.add_argument("--seed", type=int, default=0, metavar="S",
                   help="seed of the drawing (default 0): the same seed draws the same cases")
    g.add_argument("--size", choices=tuple(SIZES), default="small",
                   help="size profile: " + "; ".join(f"{s.name}: {s.doc}"
                                                      for s in SIZES.values())
                        + " (default small)")
    g = p.add_argument_group("checks and shrinking")
    g.add_argument("--repeats", type=int, default=2, metavar="R",
                   help="calls per item for the determinism check (default 2; 1 disables)")
    g.add_argument("--shrink-tries", type=int, default=DEFAULT_SHRINK_TRIES, metavar="N",
                   help=f"items run at most to shrink one failure (default "
                        f"{DEFAULT_SHRINK_TRIES}; 0: no shrinking)")
    g.add_argument("--shrink-time", type=float, metavar="S",
                   help="seconds kept for shrinking at the end of --time (default a quarter "
                        "of it); without --time, a bound on the shrinking alone")
    g = p.add_argument_group("isolation")
    g.add_argument("--workers", type=int, metavar="N",
                   help="worker processes running the drawn items and the shrinking (default "
                        "as run: one per visible GPU, one on a CPU; 0: in this process)")
    add_threads_option(g)
    g.add_argument("--item-timeout", type=float, metavar="S",
                   help="an item still running after S seconds is recorded as timeout and "
                        "its worker killed (default 600)")
    add_results_options(p)
    # for suite.commands.run.pool_options: fuzzing never times, so workers may share a GPU;
    # they take every visible GPU
    p.set_defaults(no_timing=True, share_gpus=True, gpus=None)


def check_options(args) -> None:
    from bwd_suite.suite.cli import at_least
    from bwd_suite.suite.errors import SuiteInputError

    for name, low in (("budget", 1), ("repeats", 1), ("shrink_tries", 0), ("workers", 0),
                      ("threads", 0)):
        at_least(args, name, low)
    at_least(args, "time", 0, above=True)
    at_least(args, "shrink_time", 0)
    if args.time is not None and args.shrink_time is not None \
            and args.shrink_time >= args.time:
        raise SuiteInputError("--shrink-time", f"must be less than --time ({args.time:g} s), "
                                               f"got {args.shrink_time:g}")
    at_least(args, "item_timeout", 0, above=True)
    if args.seed < 0 or args.seed > 2**63 - 1:
        raise SuiteInputError("--seed", f"must be a non-negative 64-bit integer, got "
                                        f"{args.seed}")


def select_impl(op_name: str, name: str, device):
    """The one implementation --impl names, of --op, runnable on the device."""
    from bwd_suite.suite import registry
    from bwd_suite.suite.errors import SuiteInputError

    names = [n.strip() for n in name.split(",") if n.strip()]
    if len(names) != 1:
        raise SuiteInputError("--impl", f"name one implementation, got {name!r}")
    chosen = registry.select_implementations(op_name, names, include_mutants=True,
                                             default_op=op_name)
    if not chosen:
        ops = sorted(i.op for i in registry.implementations() if i.name == names[0])
        raise SuiteInputError("--impl", f"{names[0]!r} is not an implementation of "
                                        f"{op_name} (it is one of {', '.join(ops)})")
    impl = chosen[0]
    if not impl.enabled:
        raise SuiteInputError("--impl", f"{impl.name} is disabled here: "
                                        f"{impl.disabled_reason}")
    if device.type not in impl.devices:
        raise SuiteInputError("--device", f"{impl.name} runs on {', '.join(impl.devices)} "
                                          f"only, not {device.type}")
    return impl


def deadlines(args, started: float) -> tuple:
    """(when the command must end, when the drawing must stop): --time, less the
    --shrink-time kept for shrinking; without --time neither (--shrink-time then counts
    from the start of the shrinking)."""
    if not args.time:
        return math.inf, math.inf
    keep = args.shrink_time if args.shrink_time is not None else args.time / 4
    return started + args.time, started + args.time - keep


class _TimeUp(Exception):
    """Raised by the sink when --time has passed: the driver stops its workers."""


class _Collect:
    """The run's sink: keeps the rows, notes the first failure, stops at --time."""

    def __init__(self, index: dict, started: float, deadline: float):
        self.rows, self.index, self.started, self.deadline = [], index, started, deadline
        self.first = None  # (case number, seconds) of the first failure

    def add(self, row) -> None:
        self.rows.append(row)
        if self.first is None and row.verdict.bad and not row.expected:
            self.first = (self.index.get(row.case_id, 0), time.monotonic() - self.started)
        if time.monotonic() > self.deadline:
            raise _TimeUp


def _comments(impl, shrunk, row, original_id: str) -> list[str]:
    tries = f"{shrunk.tries} tries" + (", stopped at --shrink-tries" if shrunk.exhausted
                                       else ", stopped at --time: not minimal"
                                       if shrunk.out_of_time else "")
    return [f"found by `python -m bwd_suite fuzz` on {impl.name}: {original_id}, shrunk "
            f"to this case in {shrunk.steps} steps ({tries})",
            f"failure: {shrunk.failure}: {row.reason}",
            f"diagnosis: {row.diagnosis or '(none)'}"]


def main(args) -> int:
    import dataclasses
    import itertools

    from bwd_suite.suite import registry, results
    from bwd_suite.suite.commands.run import (check_results_place, pool_options, results_file,
                                    workers_text)
    from bwd_suite.suite.driver import Driver, Tee
    from bwd_suite.suite.errors import SuiteInputError
    from bwd_suite.suite.fuzz.draw import TAGS, DrawStats, draw_cases, fuzz_case, refusal
    from bwd_suite.suite.fuzz.shrink import failure_of, input_numel, shrink
    from bwd_suite.suite.fuzz.sizes import SIZES
    from bwd_suite.suite.fuzz.toml import case_block, case_name
    from bwd_suite.suite.plan import Plan
    from bwd_suite.suite.progress import Progress
    from bwd_suite.suite.runner import RunOptions
    from bwd_suite.suite.selection import parse_device

    check_options(args)
    dev = parse_device(args.device)
    spec = registry.op(args.op, where="--op")
    impl = select_impl(spec.name, args.impl, dev)
    check_results_place(args)
    size = SIZES[args.size]
    budget = args.budget or (TIME_ONLY_BUDGET if args.time else DEFAULT_BUDGET)

    started = time.monotonic()
    stats = DrawStats()
    draws = draw_cases(spec, impl, dev.type, args.seed, size, stats, max_attempts=MISSES)
    first_round = list(itertools.islice(draws, min(budget, ROUND) if args.time else budget))
    if not first_round:
        raise SuiteInputError("--op", f"no case of {spec.name} drawn under --size "
                                      f"{size.name} can run on {impl.name} ({stats.line()})")
    run = results.environment(dev, "fuzz")
    out_path = results_file(args, run.run_id)
    pool = pool_options(args, dev, "fuzz", out_path.with_name(out_path.name + ".workers"))
    limit = (f"{budget} cases" if args.budget or not args.time else "") \
        + (" or " if args.budget and args.time else "") \
        + (f"{args.time:g} s" if args.time else "")
    print(f"fuzz {run.run_id}: {spec.name} x {impl.name}, seed {args.seed}, size "
          f"{size.name}, up to {limit} on {dev} ({run.device_name}){workers_text(pool)}, "
          f"results -> {out_path}", file=sys.stderr)

    opts = RunOptions(device=dev, golden_device=dev, repeats=args.repeats, timing=False)
    writer = results.ResultsWriter(out_path, overwrite=args.force)
    end, draw_end = deadlines(args, started)
    cases: list = []
    index: dict = {}
    sink = _Collect(index, started, draw_end)
    driver = Driver(opts, run, None, pool)
    stopped, batch, bad = "", first_round, []
    try:
        # rounds of drawn cases, each run through the driver: one round of --budget cases,
        # or, under --time, rounds of ROUND, ROUND, 2 ROUND, 4 ROUND... until the time is up
        while batch:
            for c in batch:
                index[c.id] = len(cases) + 1
                cases.append(c)
            progress = [] if args.quiet else [Progress(len(batch))]
            try:
                driver.run(Plan.of(batch, lambda op: [impl]), Tee(writer, sink, *progress))
            except _TimeUp:
                stopped = (f"; drawing stopped {end - draw_end:.0f} s before --time "
                           f"{args.time:g} s, for shrinking")
                break
            finally:
                for pr in progress:
                    pr.close()
            left = budget - len(cases)
            batch = list(itertools.islice(draws, min(left, len(cases))))
        rows = sink.rows
        elapsed = time.monotonic() - started
        bad = [r for r in rows if r.verdict.bad and not r.expected]
        print(f"{len(rows)} items run in {elapsed:.1f} s{stopped}: {len(bad)} failed"
              + (f" (first: case {sink.first[0]}, after {sink.first[1]:.1f} s)"
                 if sink.first else "") + f"; {stats.line()}", file=sys.stderr)

        groups: dict = {}
        timeouts = []
        for r in bad:
            f = failure_of(r)
            if f is None:
                timeouts.append(r)
            else:
                groups.setdefault(f.core, []).append(r)
        for r in timeouts:
            print(f"not shrunk ({r.verdict}): {r.case_id}: {r.reason}", file=sys.stderr)

        if not args.time and args.shrink_time:
            end = time.monotonic() + args.shrink_time
        by_id = {c.id: c for c in cases}
        numel = {}

        def size_of(r):
            if r.case_id not in numel:
                numel[r.case_id] = input_numel(spec, by_id[r.case_id].params)
            return numel[r.case_id]

        def run_one(params):
            case = fuzz_case(spec, params)
            return driver.rows(Plan.single(spec, case, impl))[0]

        def can_run(params):
            return refusal(spec, impl, params, dev.type) is None

        for k, (failure, members) in enumerate(groups.items(), start=1):
            # the smallest, preferring one where the yardstick is not as wrong
            first = min(members, key=lambda r: (failure_of(r).yardstick_too, size_of(r)))
            print(f"shrinking {failure} ({len(members)} failing cases) from {first.case_id}",
                  file=sys.stderr)
            shrunk = shrink(spec, dict(by_id[first.case_id].params), first, run_one,
                            can_run, args.shrink_tries, device_type=dev.type,
                            stop=lambda: time.monotonic() > end)
            final = dataclasses.replace(shrunk.row, tags=sorted(TAGS + ("shrunk",)))
            writer.add(final)
            case = fuzz_case(spec, shrunk.params)
            name = case_name(f"fuzz-{impl.name}" + (f"-{k}" if len(groups) > 1 else ""))
            print(case_block(spec, shrunk.params, name, case.seed,
                             _comments(impl, shrunk, final, first.case_id)))
            print(f"  {failure}: {shrunk.start_key[0]} -> {shrunk.key[0]} input elements "
                  f"in {shrunk.steps} steps, {shrunk.tries} tries: {case.id}",
                  file=sys.stderr)
    except KeyboardInterrupt:
        driver.close()
        writer.close(interrupted=True)
        print(f"\ninterrupted: {len(sink.rows)} finished items kept in {out_path}",
              file=sys.stderr)
        return 130
    driver.close()
    writer.close()
    print(f"results: {out_path}", file=sys.stderr)
    return 1 if bad else 0
