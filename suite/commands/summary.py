"""Print the summary of earlier results again, as `run` printed it last: the failures with
their reasons and rerun commands, the table and the final line of counts; `--wide` and
`--full-reasons` show what the run's own summary left out, without running anything.

Exit status: 0 when every item passed, was unsupported or failed as declared; 1 when some
item counts against the results (as `run` would have exited); 2 on bad input.
"""

from __future__ import annotations

from pathlib import Path

HELP = "print a run's summary again from its results (--wide, --full-reasons)"


def add_arguments(p) -> None:
    from bwd_suite.suite.commands.run import add_summary_options

    p.add_argument("results", type=Path, nargs="+", metavar="RESULTS",
                   help="results files or folders of them (the shards of a run)")
    add_summary_options(p)


def main(args) -> int:
    from bwd_suite.suite import summary
    from bwd_suite.suite.errors import SuiteInputError
    from bwd_suite.suite.regression import latest_rows
    from bwd_suite.suite.reproduce import rerun_failed_of
    from bwd_suite.suite.results import read_results
    from bwd_suite.suite.rows import ResultRow

    df = read_results(args.results)
    if df.empty:
        raise SuiteInputError(", ".join(map(str, args.results)), "holds no result rows")
    # the latest row of each item, as --rerun-failed reads them
    rows = [ResultRow.from_record(r) for r in latest_rows(df).to_dict("records")]
    footer = [f"results: {', '.join(map(str, args.results))}"]
    command = rerun_failed_of(args.results, rows)
    if command:
        n = sum(r.counts_against for r in rows)
        footer.append(f"rerun the {n} failing item{'s' * (n != 1)}: {command}")
    print(summary.render(rows, args.wide, args.full_reasons, footer))
    return 1 if command else 0
