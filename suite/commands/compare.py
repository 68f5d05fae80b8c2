"""Compare a current run with a baseline run: timing regressions and improvements (ratio
of medians beyond a factor and a Mann-Whitney U test, both required), new and fixed
failures, cases that disappeared and new cases.

Exit status, for CI gating: 1 on a regression or a new failure, 0 otherwise, 2 on bad
input (a missing or unreadable file, another schema version, no items in common).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from suite.errors import SuiteInputError

HELP = "compare two runs; exit 1 on a timing regression or a new failure (CI gate)"
MAX_LINES = 40  # per category, in the terminal


def add_rule_arguments(parser: argparse.ArgumentParser) -> None:
    """--factor and --alpha, shared with the report command."""
    g = parser.add_argument_group("regression rule")
    g.add_argument("--factor", type=float, default=1.10, metavar="F",
                   help="flag a timing change when the ratio of medians passes F (slower) "
                        "or 1/F (faster) (default 1.10)")
    g.add_argument("--alpha", type=float, default=0.01, metavar="P",
                   help="a flagged change must also be significant: two-sided Mann-Whitney "
                        "U test on the kept samples with p < P (default 0.01; the report's "
                        "side-by-side speedups are coloured by the same test)")


def rule_from(args):
    from suite.regression import Rule

    if not args.factor >= 1.0:
        raise SuiteInputError("--factor", f"must be at least 1, got {args.factor}")
    if not 0.0 < args.alpha <= 1.0:
        raise SuiteInputError("--alpha", f"must be in (0, 1], got {args.alpha}")
    return Rule(factor=args.factor, alpha=args.alpha)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("baseline", type=Path, metavar="BASELINE",
                        help="baseline results: a parquet file or a folder of them")
    parser.add_argument("current", type=Path, metavar="CURRENT",
                        help="current results: a parquet file or a folder of them")
    add_rule_arguments(parser)
    parser.add_argument("--max-lines", type=int, default=MAX_LINES, metavar="N",
                        help=f"items printed per category (default {MAX_LINES}; "
                             f"counts are always complete)")


def describe_run(df) -> str:
    """One line about where results come from."""
    runs = list(dict.fromkeys(df["run_id"]))
    first = df.iloc[0]
    ids = ", ".join(runs[:2]) + (f" and {len(runs) - 2} more" if len(runs) > 2 else "")
    return (f"{ids}: {len(df)} items, {first['device_name']} ({first['device']}), "
            f"profile {first['profile']}, commit {first['git_commit'] or '?'}")


def _fmt_s(s: float) -> str:
    from reports.fmt import time_text

    return time_text(s)


def render(c, max_lines: int = MAX_LINES) -> list:
    """The comparison as terminal lines (the same categories as the report)."""
    lines = [f"compared: {c.n_common} items in both runs, {c.n_timed} timed in both; "
             f"{c.rule.describe()}"]
    lines += [f"environment differs: {e}" for e in c.env_differences]
    if c.n_flush_differs:
        lines.append(f"not compared: {c.n_flush_differs} items timed in both runs after "
                     f"different L2 flushes (l2_flush)")

    def section(title, entries, line):
        lines.append(f"\n{title} ({len(entries)})" + (":" if entries else ""))
        lines.extend("  " + line(e) for e in entries[:max_lines])
        if len(entries) > max_lines:
            lines.append(f"  ... and {len(entries) - max_lines} more")

    def timing(t):
        return (f"x{t.ratio:.3f}  p={t.p:.2g}  {t.case_id}  [{t.impl}]  "
                f"{_fmt_s(t.base_median_s)} -> {_fmt_s(t.cur_median_s)}  "
                f"({t.n_base}/{t.n_cur} samples)")

    def verdict(v):
        before = v.before or "new case"
        return f"{before} -> {v.after}  {v.case_id}  [{v.impl}]  {(v.reason or '')[:200]}"

    def presence(p):
        return f"{p.case_id}  [{p.impl}]  {p.verdict}"

    section("REGRESSIONS", sorted(c.regressions, key=lambda t: -t.ratio), timing)
    section("NEW FAILURES", list(c.new_failures), verdict)
    section("improvements", sorted(c.improvements, key=lambda t: t.ratio), timing)
    section("fixed failures", list(c.fixed_failures), verdict)
    section("beyond the factor but not significant", c.uncertain, timing)
    section("disappeared (baseline only)", list(c.disappeared), presence)
    section("new cases (current only)", list(c.new_cases), presence)
    n_reg, n_new = len(c.regressions), len(c.new_failures)
    lines.append("\nresult: " + (f"REGRESSED ({n_reg} regression{'s' * (n_reg != 1)}, "
                                 f"{n_new} new failure{'s' * (n_new != 1)})"
                                 if c.gate_failed else
                                 "ok (no regressions, no new failures)"))
    return lines


def main(args) -> int:
    from suite import regression
    from suite.results import read_results

    rule = rule_from(args)
    if args.max_lines < 0:
        raise SuiteInputError("--max-lines", f"must be at least 0, got {args.max_lines}")
    base, cur = read_results([args.baseline]), read_results([args.current])
    for df, path in ((base, args.baseline), (cur, args.current)):
        if df.empty:
            raise SuiteInputError(str(path), "holds no result rows")
    c = regression.compare(base, cur, rule)
    if not c.overlaps:
        raise SuiteInputError(str(args.baseline), f"shares no (op, case, implementation) "
                                                  f"with {args.current}: nothing to compare")
    print(f"baseline: {describe_run(base)}")
    print(f"current:  {describe_run(cur)}")
    print("\n".join(render(c, args.max_lines)))
    return 1 if c.gate_failed else 0
