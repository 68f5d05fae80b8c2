"""Run a profile of cases x implementations: correctness against float64, determinism and
timing per item; prints progress and a summary, writes one parquet file of rows.

Exit status: 0 when every item passed, was unsupported or failed as its implementation
declares (known failures, listed apart); 1 when some item failed, raised or timed out
undeclared, or a declared failure passed (an unexpected pass); 2 on bad input (one line,
before anything runs); 130 when interrupted (finished items are kept).
"""

from __future__ import annotations

import sys
from pathlib import Path

HELP = "run cases x implementations and write parquet results"


def add_arguments(p) -> None:
    from bwd_suite.suite.cli import add_gpu_timing_options, add_results_options, add_selection

    add_selection(p)
    g = p.add_argument_group("checks and timing")
    g.add_argument("--repeats", type=int, default=3, metavar="R",
                   help="calls per item for the determinism check (default 3; 1 disables)")
    g.add_argument("--no-timing", action="store_true", help="correctness only")
    g.add_argument("--samples", type=int, default=20, metavar="N",
                   help="timed samples per item, at most (default 20)")
    g.add_argument("--warmup", type=int, default=3, metavar="N",
                   help="untimed calls before sampling, at least (default 3; 0: none)")
    g.add_argument("--max-time", type=float, default=1.0, metavar="S",
                   help="stop sampling an item after this many seconds (default 1.0)")
    add_gpu_timing_options(g)
    g.add_argument("--golden-device", metavar="DEV",
                   help="where the float64 golden is computed (default: the run device)")
    g.add_argument("--include-mutants", action="store_true",
                   help="also run the deliberately broken implementations")
    g.add_argument("--rerun-failed", type=Path, nargs="+", metavar="RESULTS",
                   help="run exactly the items that failed, raised or timed out in these "
                        "results (and the unexpected passes), instead of a profile")
    g.add_argument("--shard", metavar="I/N",
                   help="run shard I of N (1 <= I <= N) of the selected cases, for a CI "
                        "matrix of N machines: cases sorted by op and id, dealt round-robin "
                        "(docs/multi-gpu.md); report and compare read the N results as one "
                        "run")
    g = p.add_argument_group("isolation")
    g.add_argument("--workers", type=int, metavar="N",
                   help="worker processes running the items, each pinned to one GPU "
                        "(default: one per GPU of --gpus, one on a CPU; 0: in this process, "
                        "no isolation)")
    g.add_argument("--gpus", metavar="LIST",
                   help="the GPUs the workers use, by index as this process sees them, "
                        "e.g. 0,1 (default: every visible GPU)")
    g.add_argument("--share-gpus", action="store_true",
                   help="allow more workers than GPUs, several on one GPU; correctness only: "
                        "needs --no-timing, as timings must not share a GPU")
    add_threads_option(g)
    g.add_argument("--item-timeout", type=float, metavar="S",
                   help="an item still running after S seconds is recorded as timeout and "
                        "its worker killed (default per profile: smoke and ci 300, gpu 600, "
                        "perf and nightly 900)")
    add_results_options(p)
    add_summary_options(p)


def add_summary_options(p) -> None:
    g = p.add_argument_group("summary")
    g.add_argument("--wide", action="store_true",
                   help="the summary's table with times, launches, memory and rates, and "
                        "whole names (wider than 100 columns)")
    g.add_argument("--full-reasons", action="store_true",
                   help="failure reasons and diagnoses whole, not shortened to a line")


DEFAULT_CPU_THREADS = 1


def add_threads_option(g) -> None:
    g.add_argument("--threads", type=int, default=DEFAULT_CPU_THREADS, metavar="N",
                   help="torch intra-op threads of each item on a CPU (default "
                        f"{DEFAULT_CPU_THREADS}: a CPU timing with torch's default of one "
                        "thread per core waits on every other process of the machine; "
                        "0: torch's default)")


def check_options(args) -> None:
    """Refuse out-of-range options before anything runs."""
    from bwd_suite.suite.cli import at_least
    from bwd_suite.suite.shard import parse_shard

    for name, low in (("repeats", 1), ("samples", 1), ("warmup", 0), ("warmup_ms", 0),
                      ("workers", 0), ("threads", 0)):
        at_least(args, name, low)
    at_least(args, "max_time", 0, above=True)
    at_least(args, "item_timeout", 0, above=True)
    check_gpu_options(args)
    if args.shard is not None:
        parse_shard(args.shard)


def check_gpu_options(args) -> None:
    """--gpus and --share-gpus, before anything runs (whether the GPUs are visible is
    checked once the device is known)."""
    from bwd_suite.suite.errors import SuiteInputError
    from bwd_suite.suite.gpus import parse_gpus

    if args.gpus is not None:
        parse_gpus(args.gpus)
        if args.workers == 0:
            raise SuiteInputError("--gpus", "picks the GPUs of worker processes; with "
                                            "--workers 0 the items run in this process "
                                            "(choose its GPU with --device)")
    if args.share_gpus and not args.no_timing:
        raise SuiteInputError("--share-gpus", "timings must not share a GPU: add --no-timing "
                                              "(sharing is for correctness runs only)")


def options(args, device, golden_device):
    from bwd_suite.suite.runner import RunOptions

    return RunOptions(device=device, golden_device=golden_device, repeats=args.repeats,
                      timing=not args.no_timing, warmup=args.warmup, samples=args.samples,
                      warmup_s=args.warmup_ms / 1e3, max_time_s=args.max_time,
                      l2_flush=args.l2_flush)


def check_results_place(args) -> None:
    """Refuse, before anything runs, an --output that exists (without --force) or cannot be
    written, or an --out folder that cannot be."""
    from bwd_suite.suite import results

    if args.output:
        results.check_writable(args.output, args.force)
    else:
        results.check_folder(args.out, "--out")


def results_file(args, run_id: str) -> Path:
    """The run's results file: --output, or <run id>.parquet in --out."""
    return args.output or args.out / f"{run_id}.parquet"


def run_gpus(args, device) -> tuple:
    """The GPUs of the run's workers, in order: --gpus, checked against the GPUs visible
    here; by default every visible GPU, from the run's device on."""
    from bwd_suite.suite import gpus

    count = gpus.visible_count()
    if not args.gpus:
        return tuple((device.index + i) % count for i in range(count))
    chosen = gpus.parse_gpus(args.gpus)
    gpus.check_visible(chosen, count)
    return chosen


def gpus_device(args, device):
    """The run's device with --gpus (its name and copy-bandwidth calibration are the
    run's): --device where it names one of them, else the first of them."""
    import torch

    from bwd_suite.suite.errors import SuiteInputError

    if device.type != "cuda":
        raise SuiteInputError("--gpus", f"the run is on {device}, not CUDA: --gpus picks "
                                        f"CUDA devices")
    chosen = run_gpus(args, device)
    if not (args.device and ":" in args.device):
        return torch.device("cuda", chosen[0])
    if device.index not in chosen:
        raise SuiteInputError("--gpus", f"{args.gpus} leaves out the run's --device {device}")
    return device


def pool_options(args, device, profile: str, log_dir: Path):
    """The run's worker processes: by default one per GPU of --gpus (every visible one),
    each pinned to its own, and one on a CPU; more workers than GPUs only with
    --share-gpus; None with --workers 0 (items in this process)."""
    import torch

    from bwd_suite.suite.gpus import assign
    from bwd_suite.suite.workers import PoolOptions, item_timeout

    if device.type == "cuda":
        chosen = run_gpus(args, device)
        n = len(chosen) if args.workers is None else args.workers
        devices = tuple(f"cuda:{g}" for g in assign(max(n, 1), chosen, args.share_gpus))
    else:
        n = 1 if args.workers is None else args.workers
        devices = ("cpu",)
    if n == 0:
        threads = cpu_threads(args, device)
        if threads:  # the items run in this process
            torch.set_num_threads(threads)
        return None
    threads = cpu_threads(args, device)
    timeout = args.item_timeout if args.item_timeout is not None else item_timeout(profile)
    return PoolOptions(workers=n, devices=devices, item_timeout_s=timeout, log_dir=log_dir,
                       threads=threads)


def cpu_threads(args, device):
    """torch's intra-op threads for items on a CPU (--threads); None: leave torch's."""
    threads = getattr(args, "threads", DEFAULT_CPU_THREADS)
    return threads if device.type == "cpu" and threads else None


def refuse_oversized(plan, device) -> None:
    """Bad input before anything runs: a case whose tensors alone overflow or exceed the
    device's whole memory (a size typo, most likely), named with its file and estimate.
    Cases that fit the device but not its free memory are the runner's `unsupported`."""
    from bwd_suite.suite.errors import SuiteInputError
    from bwd_suite.suite.memory import too_large

    for entry in plan:
        why = too_large(entry.spec, entry.case.params, device)
        if why:
            where = f"{entry.case.file}, case {entry.case.id!r}" if entry.case.file \
                else f"case {entry.case.id!r}"
            raise SuiteInputError(where, f"cannot run on {device}: {why}")


def not_here(plan, device) -> dict:
    """"op/impl" -> NotHere for the implementations of the plan that cannot run on this
    device at all (disabled, or for other devices): the progress leaves them out."""
    from bwd_suite.suite.progress import NotHere

    counts: dict = {}
    for entry in plan:
        for impl in entry.impls:
            why = impl.disabled_reason if not impl.enabled else (
                None if device.type in impl.devices
                else f"runs on {', '.join(impl.devices)} only")
            if why:
                key = f"{impl.op}/{impl.name}"
                counts[key] = NotHere(counts[key].items + 1 if key in counts else 1, why)
    return counts


def workers_text(pool) -> str:
    """", 2 workers on cuda:0, cuda:1" for the run's first line."""
    if pool is None:
        return ""
    gpus = sorted({d for d in pool.devices[:pool.workers] if d.startswith("cuda")})
    return (f", {pool.workers} worker{'s' * (pool.workers > 1)}"
            + (f" on {', '.join(gpus)}" if gpus else ""))


def footer(rows, out_path: Path) -> list:
    """The lines before the summary's last: the results file and, after a failing run,
    the command that reruns exactly its failures (what the run was given, read off its
    rows, as `summary` reads them later)."""
    from bwd_suite.suite.reproduce import rerun_failed_of

    lines = [f"results: {out_path}"]
    command = rerun_failed_of(out_path, list(rows))
    if command:
        n = sum(r.counts_against for r in rows)
        lines.append(f"rerun the {n} failing item{'s' * (n != 1)}: {command}")
    return lines


def main(args) -> int:
    import time

    from bwd_suite.suite import results, roofline, summary
    from bwd_suite.suite.driver import Driver, Rows, Tee, count_bad
    from bwd_suite.suite.errors import SuiteInputError
    from bwd_suite.suite.progress import Progress
    from bwd_suite.suite.rerun import rerun_selection
    from bwd_suite.suite.selection import parse_device, select
    from bwd_suite.suite.shard import parse_shard, split_plan

    check_options(args)
    sel = rerun_selection(args) if args.rerun_failed else select(args)
    dev, plan = sel.device, sel.plan
    if args.gpus:
        dev = gpus_device(args, dev)
    golden_dev = parse_device(args.golden_device, "--golden-device") if args.golden_device \
        else dev
    if not plan.n_items:
        raise SuiteInputError("--profile",
                              f"no cases of profile {sel.profile!r} match the selection")
    refuse_oversized(plan, dev)

    shard = ""
    if args.shard is not None:
        whole = plan.n_items
        plan = split_plan(plan, parse_shard(args.shard))
        shard = f", shard {args.shard}: {plan.n_items} of {whole} items"
    check_results_place(args)
    ceilings = roofline.load_ceilings(dev)
    lacking = roofline.missing(ceilings, dev)
    if lacking and not args.no_timing:
        print(f"no calibration of the {', '.join(lacking)} for {ceilings.device_name} (a "
              f"copy must be measured after the {roofline.CALIBRATION_FLUSH} L2 flush): "
              f"measuring it now (`python -m bwd_suite calibrate` stores it)", file=sys.stderr)
        ceilings = roofline.calibrate(dev, only_missing=True)
    run = results.environment(dev, sel.profile)
    out_path = results_file(args, run.run_id)
    pool = pool_options(args, dev, sel.profile, out_path.with_name(out_path.name + ".workers"))
    print(f"run {run.run_id}: profile {sel.profile}{shard}, {plan.n_items} items on {dev} "
          f"({run.device_name}){workers_text(pool)}, results -> {out_path}", file=sys.stderr)
    writer = results.ResultsWriter(out_path, overwrite=args.force, planned=plan.n_items)
    rows = Rows()
    started = time.monotonic()
    progress = Progress(plan.n_items, args.quiet, not_here=not_here(plan, dev))
    try:
        with Driver(options(args, dev, golden_dev), run, ceilings, pool) as driver:
            driver.run(plan, Tee(writer, rows, progress))
    except KeyboardInterrupt:
        progress.close()
        writer.close(interrupted=True)
        print(f"\ninterrupted: {len(rows)} of {plan.n_items} items finished, kept in "
              f"{out_path}", file=sys.stderr)
        return 130
    progress.close()
    writer.close(interrupted=len(rows) < plan.n_items)
    print(summary.render(rows, args.wide, args.full_reasons, footer(rows, out_path),
                         time.monotonic() - started))
    return 1 if count_bad(rows) else 0
