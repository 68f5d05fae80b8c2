"""Command line: `python -m suite <command>` (also installed as `bwd-suite`).

    list        ops, case counts per profile, implementations and their availability
    run         run a profile of cases, write results/<run id>.parquet, print a summary
    calibrate   measure the copy bandwidth of the device for the roofline columns
    ...         more commands, one module each under suite/commands/

Bad input (a case file, an op, profile or implementation name) exits with code 2 and one
line naming the file and key or the flag, before anything runs.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Optional

from suite.errors import EXIT_BAD_INPUT, SuiteInputError

# suite.timing.L2_FLUSH_MODES and DEFAULT_WARMUP_S, repeated so that building the parser
# does not import torch (tests/test_timing.py checks that they agree)
L2_FLUSH_MODES = ("clean", "dirty", "none")
DEFAULT_WARMUP_MS = 25.0

DEFAULT_RESULTS_DIR = Path("results")


def _default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _add_selection(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("selection")
    g.add_argument("--profile", metavar="NAME",
                   help="cases tagged with this profile: smoke (seconds on a CPU), ci, gpu, "
                        "perf, nightly (default: smoke on a CPU, gpu with CUDA)")
    g.add_argument("--op", metavar="OP", help="only this op (default: all)")
    g.add_argument("--impl", metavar="NAMES",
                   help="comma-separated implementation names, or package.module:object "
                        "(default: every non-mutant implementation of the op)")
    g.add_argument("--case", metavar="SUBSTRING", action="append",
                   help="only case ids containing this text (repeatable: any of them)")
    g.add_argument("--cases", metavar="PATH", action="append", type=Path,
                   help="case files or folders (default: the repository's cases/)")
    g.add_argument("--device", metavar="DEV",
                   help="torch device to run on (default: cuda when available, else cpu)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bwd-suite", description="Conformance and benchmark suite for backward kernels.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("list", help="show ops, cases per profile and implementations")
    _add_selection(p)
    p.add_argument("--ids", action="store_true", help="also list every selected case id")

    p = sub.add_parser("run", help="run cases x implementations and write parquet results")
    _add_selection(p)
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

    p = sub.add_parser("calibrate", help="measure the device copy bandwidth (roofline ceiling)")
    p.add_argument("--device", metavar="DEV", help="default: cuda when available, else cpu")
    p.add_argument("--size-mib", type=int, metavar="MIB",
                   help="bytes copied per sample (default 2048 on CUDA, 256 on CPU)")

    # further commands live in suite/commands/<name>.py, one module each
    for name, mod in _command_modules().items():
        mod.add_arguments(sub.add_parser(name, help=mod.HELP, description=mod.__doc__))
    return parser


def _command_modules() -> dict:
    """Modules under suite/commands/: each has HELP, add_arguments(parser), main(args)."""
    import importlib
    import pkgutil

    from suite import commands

    return {info.name: importlib.import_module(f"suite.commands.{info.name}")
            for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda i: i.name)}


def add_gpu_timing_options(g) -> None:
    """--warmup-ms and --l2-flush (suite.timing's warmup_s and l2_flush), for every command
    or script that times on CUDA."""
    g.add_argument("--warmup-ms", type=float, default=DEFAULT_WARMUP_MS, metavar="MS",
                   help="on CUDA, more untimed calls until they have taken this long "
                        f"(default {DEFAULT_WARMUP_MS:g}, as triton's do_bench)")
    g.add_argument("--l2-flush", choices=L2_FLUSH_MODES, default="clean",
                   help="L2 flush before each sample (CUDA): clean (default) reads 256 MiB and "
                        "leaves no dirty lines; dirty zeroes it as triton's do_bench does, and "
                        "the timed call also writes back the flush's lines; none")


def at_least(args, name: str, low: float, above: bool = False) -> None:
    """Stop before anything runs when option `name` is below `low` (or not above it)."""
    value = getattr(args, name)
    if value is not None and (value <= low if above else value < low):
        raise SuiteInputError(f"--{name.replace('_', '-')}",
                              f"must be {'above' if above else 'at least'} {low:g}, got {value:g}")


def _device(name: Optional[str], flag: str = "--device"):
    import torch

    name = name or _default_device()
    try:
        dev = torch.device(name)
    except RuntimeError as e:
        raise SuiteInputError(flag, f"{name!r} is not a torch device: {e}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise SuiteInputError(flag, f"{name!r}: CUDA is not available on this machine")
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    return dev


def _select(args):
    """Validated (device, profile, [(spec, cases, impls)]) or SuiteInputError."""
    from suite import cases as cases_mod
    from suite import registry

    dev = _device(args.device)
    profile = args.profile or ("gpu" if dev.type == "cuda" else "smoke")
    cases_mod.profile_names(profile)
    if args.op:
        registry.op(args.op, where="--op")
    cases = cases_mod.load_cases(args.cases or (), op=args.op, profile=profile)
    if args.case:
        cases = [c for c in cases if any(s in c.id for s in args.case)]
    names = [n.strip() for n in args.impl.split(",") if n.strip()] if args.impl else None
    plan = []
    for op_name, spec in registry.ops().items():
        op_cases = [c for c in cases if c.op == op_name]
        if not op_cases:
            continue
        impls = registry.select_implementations(op_name, names,
                                                getattr(args, "include_mutants", False))
        if impls:
            plan.append((spec, op_cases, impls))
    if names and not plan:
        raise SuiteInputError("--impl", f"{args.impl!r} implements none of the selected ops")
    return dev, profile, plan


def cmd_list(args) -> int:
    from suite import cases as cases_mod
    from suite import registry

    all_cases = cases_mod.load_cases(args.cases or (), op=args.op)
    dev = _device(args.device)
    print("ops:")
    for name, spec in registry.ops().items():
        if args.op and name != args.op:
            continue
        print(f"  {name}: {spec.doc}")
        print(f"    params: {', '.join(p.name for p in spec.params.params)}")
    print("\ncases per profile:")
    ops_shown = sorted({c.op for c in all_cases})
    header = f"  {'op':<20}" + "".join(f"{p:>9}" for p in cases_mod.PROFILES)
    print(header)
    for o in ops_shown:
        counts = [sum(c.op == o and c.in_profile(p) for c in all_cases)
                  for p in cases_mod.PROFILES]
        print(f"  {o:<20}" + "".join(f"{n:>9}" for n in counts))
    print(f"\nimplementations (device {dev}):")
    for impl in registry.implementations(args.op):
        status = impl.unsupported_reason({}, dev.type) if not impl.enabled or \
            dev.type not in impl.devices else None
        state = f"unavailable: {status}" if status else "available"
        label = f"{impl.op}/{impl.name}"
        print(f"  {label:<46} {impl.kind:<10} {','.join(impl.devices):<9} "
              f"{state}  {impl.doc}")
    if args.ids:
        profile = args.profile or ("gpu" if dev.type == "cuda" else "smoke")
        cases_mod.profile_names(profile)
        print(f"\ncase ids in profile {profile}:")
        for c in all_cases:
            if c.in_profile(profile) and (not args.case or any(s in c.id for s in args.case)):
                print(f"  {c.id}")
    return 0


class _Progress:
    def __init__(self, total: int, quiet: bool):
        self.total, self.done, self.quiet = total, 0, quiet
        self.tty = sys.stderr.isatty()
        self.start = time.monotonic()
        self.every = max(1, total // 20)

    def item(self, row: dict) -> None:
        self.done += 1
        if row["verdict"] in ("fail", "error"):
            self._clear()
            print(f"  {row['verdict'].upper()} {row['impl']} {row['case_id']}: "
                  f"{row['reason'][:300]}", file=sys.stderr)
        if self.quiet:
            return
        elapsed = time.monotonic() - self.start
        eta = elapsed / self.done * (self.total - self.done)
        line = f"[{self.done:>5}/{self.total}] {elapsed:6.1f}s, ~{eta:5.0f}s left  " \
               f"{row['impl']} {row['case_id']}"
        if self.tty:
            print("\r" + line[:150].ljust(150), end="", file=sys.stderr, flush=True)
        elif self.done % self.every == 0 or self.done == self.total:
            print(line, file=sys.stderr, flush=True)

    def _clear(self):
        if self.tty and not self.quiet:
            print("\r" + " " * 150 + "\r", end="", file=sys.stderr)

    def close(self):
        self._clear()


def cmd_run(args) -> int:
    from suite import results, roofline, summary
    from suite.runner import RunOptions, run_case

    for name, low in (("repeats", 1), ("samples", 1), ("warmup", 0), ("warmup_ms", 0)):
        at_least(args, name, low)
    at_least(args, "max_time", 0, above=True)
    dev, profile, plan = _select(args)
    golden_dev = _device(args.golden_device, "--golden-device") if args.golden_device else dev
    n_items = sum(len(c) * len(i) for _, c, i in plan)
    if not n_items:
        raise SuiteInputError("--profile", f"no cases of profile {profile!r} match the selection")

    ceilings = roofline.load_ceilings(dev)
    if ceilings.copy_gbps is None and not args.no_timing:
        print(f"no copy-bandwidth calibration for {ceilings.device_name} (or one measured "
              f"without the {roofline.CALIBRATION_FLUSH} L2 flush): measuring it now "
              f"(`python -m suite calibrate` stores it)", file=sys.stderr)
        ceilings = roofline.calibrate(dev)
    env = results.environment(dev, profile)
    out_path = args.output or args.out / f"{env['run_id']}.parquet"
    opts = RunOptions(device=dev, golden_device=golden_dev, repeats=args.repeats,
                      timing=not args.no_timing, warmup=args.warmup, samples=args.samples,
                      warmup_s=args.warmup_ms / 1e3, max_time_s=args.max_time,
                      l2_flush=args.l2_flush)
    print(f"run {env['run_id']}: profile {profile}, {n_items} items on {dev} "
          f"({env['device_name']}), results -> {out_path}", file=sys.stderr)
    writer = results.ResultsWriter(out_path)
    progress = _Progress(n_items, args.quiet)
    try:
        for spec, cases, impls in plan:
            for case in cases:
                for row in run_case(spec, case, impls, opts, env, ceilings):
                    writer.append(row)
                    progress.item(row)
    except KeyboardInterrupt:
        progress.close()
        writer.close()
        print(f"\ninterrupted: {len(writer.rows)} finished items kept in {out_path}",
              file=sys.stderr)
        return 130
    progress.close()
    writer.close()
    print(summary.render(writer.rows))
    print(f"results: {out_path}")
    bad = sum(r["verdict"] in ("fail", "error") for r in writer.rows)
    return 1 if bad else 0


def cmd_calibrate(args) -> int:
    from suite import roofline

    at_least(args, "size_mib", 1)
    dev = _device(args.device)
    size = args.size_mib * 2**20 if args.size_mib else None
    ceilings = roofline.calibrate(dev, size_bytes=size) if size else roofline.calibrate(dev)
    print(f"{ceilings.device_name}: copy bandwidth {ceilings.copy_gbps:.1f} GB/s "
          f"(read + write), saved to {roofline.calibration_path()}")
    return 0


COMMANDS = {"list": cmd_list, "run": cmd_run, "calibrate": cmd_calibrate}


def main(argv: Optional[list] = None) -> int:
    args = build_parser().parse_args(argv)
    handler = COMMANDS.get(args.command) or _command_modules()[args.command].main
    try:
        return handler(args)
    except SuiteInputError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
