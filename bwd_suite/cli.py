"""Command line: `python -m bwd_suite <command>` (also installed as `bwd-suite`).

Every command is a module with HELP (one line), `add_arguments` and `main(args) -> int`,
under suite/commands/ (running and inspecting: list, run, calibrate, fuzz, ...) or
reports/commands/ (reading results: report, compare); this module gathers both, so that
suite/ never imports reports/. Bad input exits 2 with one line naming the file and key or
the flag, before anything runs (bwd_suite.suite.errors).
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from typing import Optional

from bwd_suite.suite.errors import EXIT_BAD_INPUT, SuiteInputError

PACKAGES = ("bwd_suite.suite.commands", "bwd_suite.reports.commands")
# shown first in --help, in this order; the other commands follow by name
FIRST = ("list", "run", "calibrate")


def command_modules() -> dict:
    """The command modules by name, in --help order."""
    found = {}
    for package in PACKAGES:
        pkg = importlib.import_module(package)
        for info in pkgutil.iter_modules(pkg.__path__):
            if info.name in found:
                raise RuntimeError(f"command {info.name} defined twice ({package})")
            found[info.name] = f"{package}.{info.name}"
    ordered = [n for n in FIRST if n in found] + sorted(n for n in found if n not in FIRST)
    return {n: importlib.import_module(found[n]) for n in ordered}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bwd-suite", description="Conformance and benchmark suite for backward kernels.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, mod in command_modules().items():
        mod.add_arguments(sub.add_parser(name, help=mod.HELP, description=mod.__doc__))
    return parser


def main(argv: Optional[list] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return command_modules()[args.command].main(args)
    except SuiteInputError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
