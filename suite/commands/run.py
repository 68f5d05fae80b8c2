"""Run a profile of cases x implementations: correctness against float64, determinism and
timing per item; prints progress and a summary, writes one parquet file of rows.

Exit status: 0 when every item passed or was unsupported, 1 when any failed or raised,
2 on bad input (before anything runs), 130 when interrupted (finished items are kept).
"""

from __future__ import annotations

import sys
from pathlib import Path

HELP = "run cases x implementations and write parquet results"


def add_arguments(p) -> None:
    from suite.cli import DEFAULT_RESULTS_DIR, add_gpu_timing_options, add_selection

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
    g = p.add_argument_group("output")
    g.add_argument("--out", type=Path, default=DEFAULT_RESULTS_DIR, metavar="DIR",
                   help="folder for the results file <run id>.parquet (default results/)")
    g.add_argument("--output", type=Path, metavar="FILE", help="exact results file path")
    g.add_argument("--quiet", action="store_true", help="no progress lines")


def check_options(args) -> None:
    """Refuse out-of-range options before anything runs."""
    from suite.cli import at_least

    for name, low in (("repeats", 1), ("samples", 1), ("warmup", 0), ("warmup_ms", 0)):
        at_least(args, name, low)
    at_least(args, "max_time", 0, above=True)


def options(args, device, golden_device):
    from suite.runner import RunOptions

    return RunOptions(device=device, golden_device=golden_device, repeats=args.repeats,
                      timing=not args.no_timing, warmup=args.warmup, samples=args.samples,
                      warmup_s=args.warmup_ms / 1e3, max_time_s=args.max_time,
                      l2_flush=args.l2_flush)


def main(args) -> int:
    from suite import results, roofline, summary
    from suite.driver import Driver, Rows, Tee, count_bad
    from suite.errors import SuiteInputError
    from suite.progress import Progress
    from suite.selection import parse_device, select

    check_options(args)
    sel = select(args)
    dev, plan = sel.device, sel.plan
    golden_dev = parse_device(args.golden_device, "--golden-device") if args.golden_device \
        else dev
    if not plan.n_items:
        raise SuiteInputError("--profile",
                              f"no cases of profile {sel.profile!r} match the selection")

    ceilings = roofline.load_ceilings(dev)
    if ceilings.copy_gbps is None and not args.no_timing:
        print(f"no copy-bandwidth calibration for {ceilings.device_name} (or one measured "
              f"without the {roofline.CALIBRATION_FLUSH} L2 flush): measuring it now "
              f"(`python -m suite calibrate` stores it)", file=sys.stderr)
        ceilings = roofline.calibrate(dev)
    run = results.environment(dev, sel.profile)
    out_path = args.output or args.out / f"{run.run_id}.parquet"
    print(f"run {run.run_id}: profile {sel.profile}, {plan.n_items} items on {dev} "
          f"({run.device_name}), results -> {out_path}", file=sys.stderr)
    writer, rows = results.ResultsWriter(out_path), Rows()
    progress = Progress(plan.n_items, args.quiet)
    driver = Driver(options(args, dev, golden_dev), run, ceilings)
    try:
        driver.run(plan, Tee(writer, rows, progress))
    except KeyboardInterrupt:
        progress.close()
        writer.close()
        print(f"\ninterrupted: {len(rows)} finished items kept in {out_path}",
              file=sys.stderr)
        return 130
    progress.close()
    writer.close()
    print(summary.render(rows))
    print(f"results: {out_path}")
    return 1 if count_bad(rows) else 0
