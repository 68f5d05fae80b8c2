"""Train the scenarios' small models (cases/scenarios/*.toml) a few steps with each op's
backward chosen per run, and judge every step against the same model in float64 and the
equivalences a training loop relies on (docs/step.md): one parquet row per (scenario,
choice of backwards, check), which report, compare and summary read like the ops' rows.

Exit status: 0 when every check passed, was unsupported or failed as declared (the
per-micro-batch mean must fail); 1 when a check failed, raised, or a declared failure
passed; 2 on bad input (a scenario naming a model, op or implementation that does not
exist, an accumulation that does not divide the batch, a checkpoint of a layer the model
does not have: one line naming the file and key, before anything runs).
"""

from __future__ import annotations

import sys

HELP = "train the scenarios' models step by step against their float64 model"


def add_arguments(p) -> None:
    from pathlib import Path

    from bwd_suite.suite.cli import add_results_options
    from bwd_suite.suite.commands.run import add_summary_options, add_threads_option

    g = p.add_argument_group("selection")
    g.add_argument("--profile", metavar="NAME",
                   help="scenarios tagged with this profile: smoke, ci, gpu, nightly "
                        "(default: smoke on a CPU, gpu with CUDA)")
    g.add_argument("--scenario", metavar="TEXT", action="append",
                   help="only scenario ids containing this text; ending in $, ids ending "
                        "with it (repeatable: any of them)")
    g.add_argument("--cases", metavar="PATH", action="append", type=Path,
                   help="scenario files or folders (default: the repository's "
                        "cases/scenarios/)")
    g.add_argument("--impl", metavar="SET", action="append",
                   help="one choice of backwards per run, repeatable: 'eager' (every op's "
                        "yardstick), 'ours' (every op's own kernel where it has one), "
                        "'native' (PyTorch's autograd through the model: F.layer_norm, "
                        "SDPA, no op contract), or OP=NAME,OP=NAME... "
                        "(OP=package.module:object from outside; the ops not named stay "
                        "eager). Default: the scenario's [impl] table")
    g.add_argument("--device", metavar="DEV",
                   help="torch device (default: cuda when available, else cpu)")
    g = p.add_argument_group("measurement")
    g.add_argument("--timed-steps", type=int, default=3, metavar="N",
                   help="steps timed per stage after one untimed step, for the plain, "
                        "checkpointed and offloaded step (default 3); the same pass counts "
                        "FLOPs, launches (CUDA) and the memory ledger")
    g.add_argument("--no-timing", action="store_true",
                   help="correctness only: no stages and no memory ledger")
    add_threads_option(g)
    add_results_options(p)
    add_summary_options(p)


def _progress(s, cs, rows, took: float, quiet: bool) -> None:
    if quiet:
        return
    bad = [r.case_id.rsplit("/", 1)[-1] for r in rows if r.counts_against]
    known = sum(r.expected for r in rows)
    print(f"{s.id} [{cs.label}]: {len(rows)} checks, {len(bad)} failing"
          + (f" ({', '.join(bad)})" if bad else "") + (f", {known} known" if known else "")
          + f", {took:.1f} s", file=sys.stderr)


def main(args) -> int:
    import time

    import torch

    from bwd_suite.suite import results, summary
    from bwd_suite.suite.commands.run import check_results_place, footer, results_file
    from bwd_suite.suite.errors import SuiteInputError
    from bwd_suite.suite.selection import parse_device
    from bwd_suite.suite.step import runner, scenario

    from bwd_suite.suite.cli import at_least

    at_least(args, "timed_steps", 1)
    device = parse_device(args.device)
    profile = args.profile or ("gpu" if device.type == "cuda" else "smoke")
    scenarios = scenario.load(args.cases or (), profile, args.scenario or ())
    if not scenarios:
        raise SuiteInputError("--scenario" if args.scenario else "--profile",
                              f"no scenario of profile {profile!r} matches")
    plan = [(s, cs) for s in scenarios
            for cs in [runner.choice_set(s, text) for text in (args.impl or [None])]]
    check_results_place(args)
    if device.type == "cpu" and args.threads:
        torch.set_num_threads(args.threads)
    run = results.environment(device, profile)
    out_path = results_file(args, run.run_id)
    planned = sum(len(s.checks) for s, _ in plan)
    print(f"step {run.run_id}: profile {profile}, {len(plan)} scenario runs ({planned} checks) "
          f"on {device} ({run.device_name}), results -> {out_path}", file=sys.stderr)
    started = time.monotonic()
    rows = []
    with results.ResultsWriter(out_path, overwrite=args.force, planned=planned) as writer:
        for s, cs in plan:
            t0 = time.monotonic()
            got = runner.run_scenario(s, cs, device, run,
                                      0 if args.no_timing else args.timed_steps)
            for r in got:
                writer.add(r)
            rows += got
            _progress(s, cs, got, time.monotonic() - t0, args.quiet)
    print(summary.render(rows, args.wide, args.full_reasons, footer(rows, out_path),
                         time.monotonic() - started))
    return 1 if any(r.counts_against for r in rows) else 0
