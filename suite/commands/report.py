"""Write one self-contained HTML report of results: run summary, conformance matrix,
failures with their error metrics, roofline table and chart, implementations side by
side and, with --baseline, the regressions and improvements against that run.

The file has no external scripts, styles or fonts: it opens offline in any browser.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from suite.commands.compare import add_rule_arguments, rule_from
from suite.errors import SuiteInputError, did_you_mean

HELP = "write a self-contained HTML report of results (optionally against a baseline run)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", type=Path, nargs="+", metavar="RESULTS",
                        help="results: parquet files or folders of them (several runs "
                             "combine; where two hold the same item the later run's is used)")
    parser.add_argument("--baseline", type=Path, nargs="+", metavar="RESULTS",
                        help="baseline run(s) to compare with: regressions, improvements, "
                             "new and fixed failures (put it after the RESULTS)")
    parser.add_argument("--baseline-impl", metavar="NAME",
                        help="implementation the speedups are measured against (default: "
                             "each op's reference implementation)")
    parser.add_argument("--output", "-o", type=Path, default=Path("report.html"),
                        metavar="FILE", help="HTML file to write (default report.html)")
    parser.add_argument("--max-cases", type=int, metavar="N",
                        help="cases listed per sweep, failing ones first (default 100; fewer "
                             "when a big run would list over 4000 items; counts, means and "
                             "comparisons always cover every row)")
    parser.add_argument("--title", metavar="TEXT", default="bwd-suite report",
                        help="page title (default 'bwd-suite report')")
    add_rule_arguments(parser)


def main(args) -> int:
    from reports import render
    from suite.results import read_results

    rule = rule_from(args)
    cap = render.DEFAULT_CAP if args.max_cases is None else args.max_cases
    if cap < 1:
        raise SuiteInputError("--max-cases", f"must be at least 1, got {cap}")
    start = time.monotonic()
    current = read_results(args.results)
    if current.empty:
        raise SuiteInputError(", ".join(map(str, args.results)), "holds no result rows")
    baseline = read_results(args.baseline) if args.baseline else None
    if args.baseline_impl and args.baseline_impl not in set(current["impl"]):
        raise SuiteInputError("--baseline-impl",
                              did_you_mean(args.baseline_impl, set(current["impl"])))
    report = render.build(current, baseline,
                          render.Options(baseline_impl=args.baseline_impl, rule=rule, cap=cap,
                                         title=args.title),
                          sources=args.results, baseline_sources=args.baseline or ())
    try:
        path = render.write(report, args.output)
    except OSError as e:
        raise SuiteInputError("--output", f"cannot write {args.output}: {e.strerror or e}") \
            from None
    size = path.stat().st_size
    print(f"report: {path} ({size / 1e6:.2f} MB, {len(current)} rows, "
          f"{time.monotonic() - start:.1f} s)", file=sys.stderr)
    if report.changes is None and baseline is not None:
        print("note: the baseline shares no items with these results", file=sys.stderr)
    return 0
