"""The options the commands share (selection, results, GPU timing) and their checks.

The command line itself is bwd_suite/cli.py: every command is a module under
suite/commands/ or reports/commands/ with HELP (one line), `add_arguments` and
`main(args) -> int`. Bad input (a case file, an op, profile or implementation name, an
option out of range) exits with code 2 and one line naming the file and key or the flag,
before anything runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bwd_suite.suite.errors import SuiteInputError

# suite.timing.L2_FLUSH_MODES and DEFAULT_WARMUP_S, repeated so that building the parser
# does not import torch (tests/harness/test_timing.py checks that they agree)
L2_FLUSH_MODES = ("clean", "dirty", "none")
DEFAULT_WARMUP_MS = 25.0

DEFAULT_RESULTS_DIR = Path("results")


def add_selection(p: argparse.ArgumentParser) -> None:
    """--profile, --op, --impl, --case, --cases, --device, --allow-large
    (suite.selection.select)."""
    g = p.add_argument_group("selection")
    g.add_argument("--profile", metavar="NAME",
                   help="cases tagged with this profile: smoke (seconds on a CPU), ci, gpu, "
                        "perf, nightly (default: smoke on a CPU, gpu with CUDA)")
    g.add_argument("--op", metavar="OP", help="only this op (default: all)")
    g.add_argument("--impl", metavar="NAMES",
                   help="comma-separated implementation names, or OP=package.module:object "
                        "(OP may be left out with --op or for an @implementation-decorated "
                        "object; default: every non-mutant implementation of the op)")
    g.add_argument("--case", metavar="SUBSTRING", action="append",
                   help="only case ids containing this text; ending in $, ids ending with "
                        "it (a whole id and $: that case alone) (repeatable: any of them)")
    g.add_argument("--cases", metavar="PATH", action="append", type=Path,
                   help="case files or folders (default: the repository's cases/)")
    g.add_argument("--device", metavar="DEV",
                   help="torch device to run on (default: cuda when available, else cpu)")
    g.add_argument("--allow-large", action="store_true",
                   help="expand sweeps of more than 100,000 combinations (suite.cases."
                        "MAX_SWEEP; refused otherwise, as a likely typo)")


def add_results_options(p: argparse.ArgumentParser) -> None:
    """--out, --output, --force, --quiet: where a run's results file goes
    (suite.commands.run.results_file) and whether progress is shown."""
    g = p.add_argument_group("output")
    g.add_argument("--out", type=Path, default=DEFAULT_RESULTS_DIR, metavar="DIR",
                   help="folder for the results file <run id>.parquet (default results/)")
    g.add_argument("--output", type=Path, metavar="FILE", help="exact results file path")
    g.add_argument("--force", action="store_true",
                   help="replace --output when it exists (otherwise refused)")
    g.add_argument("--quiet", action="store_true", help="no progress lines")


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


# The most each numeric option takes: beyond these a value is a typo (a repeat count of
# 10^20 would run for ever), refused before anything runs. Keyed by the option's dest.
MAXIMA = {"repeats": 1000, "samples": 100_000, "warmup": 100_000, "warmup_ms": 600_000,
          "max_time": 86_400, "workers": 1024, "threads": 1024, "item_timeout": 7 * 86_400,
          "budget": 1_000_000_000, "time": 30 * 86_400, "shrink_tries": 1_000_000,
          "shrink_time": 30 * 86_400, "max_lines": 10_000_000, "max_cases": 10_000_000,
          "size_mib": 1 << 20, "factor": 1000.0, "timed_steps": 1000}


def at_least(args, name: str, low: float, above: bool = False) -> None:
    """Stop before anything runs when option `name` is not a finite number (argparse's
    float takes nan and inf, and nan passes every comparison), is below `low` (or not
    above it), or is beyond its sane maximum (MAXIMA)."""
    import math

    value = getattr(args, name)
    flag = f"--{name.replace('_', '-')}"
    if isinstance(value, float) and not math.isfinite(value):
        raise SuiteInputError(flag, f"must be a finite number, got {value}")
    if value is not None and (value <= low if above else value < low):
        raise SuiteInputError(flag,
                              f"must be {'above' if above else 'at least'} {low:g}, got {value:g}")
    high = MAXIMA.get(name)
    if value is not None and high is not None and value > high:
        raise SuiteInputError(flag, f"must be at most {high:,g}, got {value:g}")
