"""Write one self-contained HTML report of results: run summary, conformance matrix,
failures grouped by diagnosed cause with their error metrics, known failures (expected),
roofline table and chart, implementations side by side, with --baseline the changes
against that run (every compared timing with its ratio and p), and with --history the
trend of every item over a folder of nightly runs, with its steps marked.

The file has no external scripts, styles or fonts: it opens offline in any browser.
--format json writes the same data as one JSON document instead.

Results of a run that did not finish its plan (a journal without its parquet file: it
crashed or is still running; an interrupted run; fewer rows than planned) are reported
with a banner at the top of the page saying so, and a line on stderr.

A file among the inputs or in the history folder that cannot be read as results (a
truncated parquet file, one written by pandas or another tool, a newer schema) is left out
with a notice on the page and a line on stderr naming it and why: one bad night must not
cost the page. Only when no results file can be read is it bad input (exit 2).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from bwd_suite.reports.commands.compare import add_rule_arguments, rule_from
from bwd_suite.suite.errors import SuiteInputError, did_you_mean

HELP = "write a self-contained HTML report of results (optionally against a baseline run)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", type=Path, nargs="+", metavar="RESULTS",
                        help="results: parquet files or folders of them (several runs "
                             "combine; where two hold the same item the later run's is used)")
    parser.add_argument("--baseline", type=Path, nargs="+", metavar="RESULTS",
                        help="baseline run(s) to compare with: regressions, improvements, "
                             "new and fixed failures (put it after the RESULTS)")
    parser.add_argument("--baseline-impl", metavar="NAME|OP=NAME,...",
                        help="implementation the speedups are measured against, per op "
                             "(causal_conv1d=dao,softmax=liger); a bare name applies to "
                             "every op that has it (default: each op's yardstick, torch_ref)")
    parser.add_argument("--history", type=Path, metavar="DIR",
                        help="a folder of earlier runs, each a results file or a folder of "
                             "them: a History section with each item's median and verdict "
                             "over the runs (ordered by run_started) and its steps")
    parser.add_argument("--format", choices=("html", "json"), default="html",
                        help="html (default): the page; json: the report's data (summary "
                             "counts, matrix, failures, known failures, roofline rows, "
                             "speedups, changes, history) as one JSON document")
    parser.add_argument("--output", "-o", type=Path, default=None,
                        metavar="FILE", help="file to write (default report.html, or "
                                             "report.json with --format json)")
    parser.add_argument("--max-cases", type=int, metavar="N",
                        help="cases listed per sweep, failing ones first (default 100; fewer "
                             "when a big run would list over 4000 items; counts, means and "
                             "comparisons always cover every row)")
    parser.add_argument("--title", metavar="TEXT", default="bwd-suite report",
                        help="page title (default 'bwd-suite report')")
    add_rule_arguments(parser)


def baseline_choice(text: Optional[str], current):
    """--baseline-impl checked against the results: every op=impl names an op of the
    results and one of its implementations; a bare name, an implementation of some op."""
    from bwd_suite.reports.speedup import parse_baseline_impl

    try:
        choice = parse_baseline_impl(text)
    except ValueError as e:
        raise SuiteInputError("--baseline-impl", str(e)) from None
    ops = set(current["op"])
    for op, impl in choice.per_op.items():
        if op not in ops:
            raise SuiteInputError("--baseline-impl", "op " + did_you_mean(op, ops))
        of_op = set(current.loc[current["op"] == op, "impl"])
        if impl not in of_op:
            raise SuiteInputError("--baseline-impl", f"{op}: " + did_you_mean(impl, of_op))
    if choice.bare and choice.bare not in set(current["impl"]):
        raise SuiteInputError("--baseline-impl", did_you_mean(choice.bare, set(current["impl"])))
    return choice


HISTORY_COLUMNS = ["run_id", "run_started", "git_commit", "device_name", "op", "case_id",
                   "case_group", "impl", "verdict", "known_failure", "time_median_s",
                   "time_samples_s", "l2_flush", "time_iqr_s", "timing_method", "host_load",
                   "bound", "tflops", "frac_peak_flops"]


@dataclass(frozen=True)
class Skipped:
    """A file left out because it cannot be read as results."""

    path: Path
    why: str  # suite.results' one-line reason
    role: str  # "results", "baseline" or "history"

    def notice(self) -> str:
        where = {"results": "", "baseline": " of the baseline",
                 "history": " of the history folder"}[self.role]
        return f"Skipped {self.path}{where}: {self.why}. The report leaves it out."


def read_readable(paths, role: str, columns: Optional[list] = None) -> tuple:
    """(rows, files read, [Skipped]) of the results files of `paths`: each file read on
    its own, so that one that cannot be read costs only itself. A path that does not exist
    stays bad input (a typo, not a bad file). rows is None when no file could be read."""
    import pyarrow as pa

    from bwd_suite.suite.results import read_table, result_files

    tables, read, skipped = [], [], []
    for f in result_files(paths):
        try:
            tables.append(read_table(f))
        except SuiteInputError as e:
            # the reader's own place (a journal's line) stays in the reason
            extra = e.where[len(str(f)):].lstrip(": ") if e.where.startswith(str(f)) else ""
            skipped.append(Skipped(f, f"{extra}: {e.what}" if extra else e.what, role))
            continue
        read.append(f)
    if not tables:
        return None, read, skipped
    table = pa.concat_tables(tables)
    return (table.select(columns) if columns else table).to_pandas(), read, skipped


def none_readable(paths, skipped: list) -> SuiteInputError:
    """The bad-input error when no file of `paths` could be read: the file's own error
    when there was one, else the first with a count of the others."""
    if len(skipped) == 1:
        return SuiteInputError(str(skipped[0].path), skipped[0].why)
    first = skipped[0]
    return SuiteInputError(", ".join(map(str, paths)),
                           f"no readable results file ({first.path}: {first.why}; and "
                           f"{len(skipped) - 1} more)")


def read_history(folder: Path) -> tuple:
    """(runs, [Skipped]) of a history folder: a (name, frame) per entry that is a results
    file (.parquet, or the journal of an unfinished run) or a folder holding some, its
    unreadable files left out. Other files are left alone; a folder without any results
    file is bad input."""
    from bwd_suite.suite.results import JOURNAL_SUFFIX

    folder = Path(folder)
    if not folder.is_dir():
        raise SuiteInputError("--history", f"{folder} is not a folder")
    runs, skipped, seen = [], [], 0
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith("."):
            continue
        if entry.is_dir():
            if not (any(entry.rglob("*.parquet")) or any(entry.rglob("*" + JOURNAL_SUFFIX))):
                continue
        elif not (entry.name.endswith(".parquet") or entry.name.endswith(JOURNAL_SUFFIX)):
            continue
        elif entry.name.endswith(JOURNAL_SUFFIX) and \
                entry.with_name(entry.name[:-len(JOURNAL_SUFFIX)]).exists():
            continue  # the journal of a finished run: its parquet file is the run
        seen += 1
        df, _, bad = read_readable([entry], "history", HISTORY_COLUMNS)
        skipped += bad
        if df is not None and len(df):
            runs.append((entry.name, df))
    if not seen:
        raise SuiteInputError("--history", f"{folder} holds no results files or folders")
    return runs, skipped


def incomplete_notes(results, baseline) -> list:
    """One line per results file (of the results, then of the baseline) whose run did not
    finish its plan: a page of it must not read as a whole run."""
    from bwd_suite.suite.results import completeness

    notes = [f"Incomplete results: {s.describe()}: the report shows its finished items only."
             for s in completeness(results) if s.incomplete]
    if baseline:
        notes += [f"Incomplete baseline: {s.describe()}: the items it lacks show as new "
                  f"cases." for s in completeness(baseline) if s.incomplete]
    return notes


def main(args) -> int:
    from bwd_suite.reports import render
    from bwd_suite.suite.text import terminal

    from bwd_suite.suite.cli import at_least
    from bwd_suite.suite.results import check_folder

    rule = rule_from(args)
    at_least(args, "max_cases", 1)
    cap = render.DEFAULT_CAP if args.max_cases is None else args.max_cases
    output = args.output or Path("report.json" if args.format == "json" else "report.html")
    check_folder(Path(output).parent, "--output")  # before the reading, not after
    start = time.monotonic()
    current, files, skipped = read_readable(args.results, "results")
    if current is None:
        raise none_readable(args.results, skipped)
    if current.empty:
        raise SuiteInputError(", ".join(map(str, args.results)), "holds no result rows")
    baseline, baseline_files = None, []
    if args.baseline:
        baseline, baseline_files, bad = read_readable(args.baseline, "baseline")
        skipped += bad
    choice = baseline_choice(args.baseline_impl, current)
    history, bad = read_history(args.history) if args.history else ((), [])
    skipped += bad
    incomplete = incomplete_notes(files, baseline_files)
    for note in incomplete:
        print(f"report: {terminal(note)}", file=sys.stderr)
    for s in skipped:
        print(f"report: {terminal(s.notice())}", file=sys.stderr)
    report = render.build(current, baseline,
                          render.Options(baseline_impl=choice, rule=rule, cap=cap,
                                         title=args.title, history=tuple(history)),
                          sources=args.results, baseline_sources=args.baseline or (),
                          incomplete=incomplete)
    if skipped:  # on the page too, first among the notices
        report = dataclasses.replace(report, notices=tuple(
            render.Notice(render.Level.WARN, s.notice()) for s in skipped) + report.notices)
    try:
        path = render.write(report, output, args.format)
    except OSError as e:
        raise SuiteInputError("--output", f"cannot write {output}: {e.strerror or e}") \
            from None
    size = path.stat().st_size
    print(f"report: {path} ({size / 1e6:.2f} MB, {len(current)} rows, "
          f"{time.monotonic() - start:.1f} s)", file=sys.stderr)
    if args.baseline and baseline is None:
        print("note: no baseline file could be read", file=sys.stderr)
    elif report.changes is None and baseline is not None:
        print("note: the baseline shares no items with these results", file=sys.stderr)
    elif report.changes is not None and report.changes.vacuous:
        print(f"note: no timed item could be compared with the baseline: "
              f"{report.changes.vacuous}", file=sys.stderr)
    return 0
