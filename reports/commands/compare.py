"""Compare a current run with a baseline run: timing regressions and improvements (ratio
of medians beyond a factor and a Mann-Whitney U test, both required), new failures of
cases in both runs, failing new cases, unexpected passes, fixed failures, known failures
(declared by the implementation: expected), cases that disappeared and new cases.

Exit status, for CI gating:
  0  ok: timings were compared and nothing regressed;
  1  regressed: a significant slowdown, a new failure, a failing new case or an unexpected
     pass (a declared known failure that passed: update the declaration);
  2  bad input: a missing or unreadable file, a newer schema version, no rows;
  3  nothing compared: the runs share no item, or no item was timed in both on the same
     device after the same L2 flush (one line says why); a gate that compared nothing
     would pass vacuously. With shared items a verdict failure still exits 1 first;
     --allow-untimed turns the second case into 0 (conformance runs without timing);
  4  incomplete: the current run did not finish its plan (a journal without its parquet
     file: it crashed or is still running; a run interrupted; fewer rows than planned):
     the items it lacks are not known to pass. Comes before 1 and 3; the first line of
     the output says so, and the result line gives what its finished items show.
     --allow-incomplete gates on the finished items instead. An incomplete baseline is
     stated on the first line, never an exit code.

Names, case ids and reasons come from the results files: the text format prints them as
one line each (control characters escaped), markdown as plain text or code spans.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import sys
from pathlib import Path

from bwd_suite.suite.errors import SuiteInputError
from bwd_suite.suite.text import code_span, markdown_cell, shorten, terminal

HELP = ("compare two runs (CI gate): exit 1 on a regression, a new failure or an "
        "unexpected pass, 3 when no timed item could be compared, 4 when the current run "
        "is incomplete")
MAX_LINES = 40  # per category, in the terminal
FORMATS = ("text", "json", "csv", "markdown")
REASON_CHARS = 200  # of a reason or a declaration in text and markdown (--full-reasons: whole)


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
    from bwd_suite.suite.regression import Rule

    from bwd_suite.suite.cli import at_least

    at_least(args, "factor", 1.0)  # finite too: --factor inf would flag nothing
    if not 0.0 < args.alpha <= 1.0:
        raise SuiteInputError("--alpha", f"must be in (0, 1], got {args.alpha}")
    return Rule(factor=args.factor, alpha=args.alpha)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("baseline", type=Path, metavar="BASELINE",
                        help="baseline results: a parquet file or a folder of them (the "
                             "shards of a run: their folder)")
    parser.add_argument("current", type=Path, nargs="+", metavar="CURRENT",
                        help="current results: parquet files or folders of them, read as "
                             "one run (the shards of `run --shard`)")
    add_rule_arguments(parser)
    parser.add_argument("--max-lines", type=int, default=MAX_LINES, metavar="N",
                        help=f"items printed per category in text and markdown (default "
                             f"{MAX_LINES}; counts are always complete, json and csv list "
                             f"every item)")
    parser.add_argument("--format", choices=FORMATS, default="text",
                        help="text (default, for people), json (one document: counts, "
                             "result, every compared timing and verdict change), csv (one "
                             "row per item and category), markdown (for a pull request)")
    parser.add_argument("--allow-untimed", action="store_true",
                        help="exit 0 instead of 3 when the runs share items but none could "
                             "be timed against the baseline (conformance runs without "
                             "timing); still 3 when they share no item")
    parser.add_argument("--full-reasons", action="store_true",
                        help=f"reasons and declarations whole in text and markdown (else "
                             f"shortened to {REASON_CHARS} characters at a word boundary; "
                             f"json and csv hold them whole)")
    parser.add_argument("--allow-incomplete", action="store_true",
                        help="gate on the finished items of a current run that did not "
                             "finish its plan (crashed, interrupted or still running) "
                             "instead of exiting 4")


def _distinct(df, col) -> list:
    """A column's distinct values, sorted (the shards of a run may differ in host and
    device)."""
    return sorted(map(str, df[col].dropna().unique())) if col in df else []


def describe_run(df) -> str:
    """One line about where results come from."""
    runs = list(dict.fromkeys(df["run_id"]))
    ids = ", ".join(runs[:2]) + (f" and {len(runs) - 2} more" if len(runs) > 2 else "")
    hosts = _distinct(df, "host")
    on = f" on {len(hosts)} hosts ({', '.join(hosts)})" if len(hosts) > 1 else ""
    return (f"{ids}: {len(df)} items, {', '.join(_distinct(df, 'device_name'))} "
            f"({', '.join(_distinct(df, 'device'))}){on}, profile "
            f"{', '.join(_distinct(df, 'profile'))}, commit "
            f"{', '.join(_distinct(df, 'git_commit')) or '?'}")


def run_info(df) -> dict:
    """The run-level facts of a results frame, for the machine-readable formats."""
    first = df.iloc[0]
    return {"run_ids": list(dict.fromkeys(map(str, df["run_id"]))), "items": len(df),
            "device_name": _distinct(df, "device_name"), "device": _distinct(df, "device"),
            "host": _distinct(df, "host"), "profile": _distinct(df, "profile"),
            "git_commit": _distinct(df, "git_commit"), "started": str(first["run_started"]),
            "l2_flush": _distinct(df, "l2_flush")}


def _fmt_s(s: float) -> str:
    from bwd_suite.reports.fmt import time_text

    return time_text(s)


EXIT_INCOMPLETE = 4  # the current run did not finish its plan


def result_line(c, code: int, items_code: int = None) -> str:
    """The verdict of the gate, one line; for exit 4 also the verdict of the finished items
    (`items_code`, the exit code they alone would give)."""
    if code == EXIT_INCOMPLETE:
        return ("result: INCOMPLETE (exit 4): the current run did not finish its plan "
                "(--allow-incomplete gates on its finished items); its finished items: "
                + result_line(c, items_code)[len("result: "):])
    if code == 3:
        return f"result: NOT COMPARED (exit 3): no timed item could be compared: " \
               f"{terminal(c.vacuous_reason)}"
    n_known = len(c.known_failures)
    known = f"; {n_known} known failure{'s' * (n_known != 1)} (expected)" if n_known else ""
    if c.gate_failed:
        counts = [(len(c.regressions), "regression"), (len(c.new_failures), "new failure"),
                  (len(c.failing_new_cases), "failing new case"),
                  (len(c.unexpected_passes), "unexpected pass")]
        return "result: REGRESSED (" + ", ".join(
            f"{n} {what}{('es' if what.endswith('ss') else 's') * (n != 1)}"
            for n, what in counts) + ")" + known
    untimed = "" if c.n_timed else "; no timings compared (--allow-untimed)"
    return "result: ok (no regressions, no new failures)" + known + untimed


def _known_groups(items) -> list:
    """(op, impl, declared reason, items) of known items, in order."""
    groups: dict = {}
    for k in items:
        groups.setdefault((k.op, k.impl, k.known_failure), []).append(k)
    return [(op, impl, why, ks) for (op, impl, why), ks in groups.items()]


def _rates(base=None, cur=None) -> tuple:
    """(baseline, current) throughput of their compute-bound items
    (reports.items.compute_rates)."""
    from bwd_suite.reports.items import compute_rates

    return compute_rates(base), compute_rates(cur)


def _rate_text(t, rates: tuple) -> str:
    """A compute-bound item's TFLOP/s in both runs and its current fraction of the peak, or
    "" where it is not compute bound in the current run."""
    base, cur = (r.get((t.op, t.case_id, t.impl)) for r in rates)
    if cur is None:
        return ""
    before = f"{base.tflops:.3g} -> " if base else ""
    frac = f" ({100 * cur.frac_peak:.3g} % of peak)" if cur.frac_peak is not None else ""
    return f"{before}{cur.tflops:.3g} TFLOP/s{frac}"


def geomean_text(c) -> str:
    """The geometric mean of the compared ratios, overall and per op (with more than one),
    or "" when no timing was compared."""
    ratio, n = c.geomean
    if ratio is None:
        return ""
    per = c.geomean_per_op
    ops = "; per op: " + ", ".join(f"{terminal(op)} x{r:.3f} over {k}"
                                   for op, (r, k) in per.items()) if len(per) > 1 else ""
    return (f"geometric mean of the ratios (current / baseline): x{ratio:.3f} over {n} "
            f"timing{'s' * (n != 1)}{ops}")


def _compared_table(c, max_lines: int, rates: tuple) -> list:
    """Every compared timing as a table (flagged ones first, then by distance from x1,
    at most `max_lines`) and the geometric mean; or why none was compared."""
    if not c.compared:
        why = c.vacuous_reason or "no item was timed in both runs"
        return [f"\ncompared timings: none: {terminal(why)}"]
    shown = c.compared[:max_lines]
    more = f"; the first {len(shown)} shown" if len(shown) < len(c.compared) else ""
    lines = [f"\ncompared timings ({len(c.compared)}, flagged ones first, then by distance "
             f"from x1{more}):",
             f"  {'ratio':>7} {'p':>7} {'baseline':>9} {'current':>9}  case [implementation]"]
    for t in shown:
        flag = "" if t.change.value == "unchanged" else f"  {t.change.value}"
        rate = _rate_text(t, rates)
        ratio = f"x{t.ratio:.3f}"
        lines.append(f"  {ratio:>7} {t.p:>7.2g} {_fmt_s(t.base_median_s):>9} "
                     f"{_fmt_s(t.cur_median_s):>9}  {terminal(t.case_id)} "
                     f"[{terminal(t.impl)}]{flag}" + (f"  {rate}" if rate else ""))
    return lines + [geomean_text(c)]


# the categories in which something moved; "nothing moved" when all are empty
MOVES = ("regressions", "new failures", "failing new cases", "unexpected passes",
         "improvements", "fixed failures")
VERDICT_MOVES = ("new failures", "failing new cases", "unexpected passes", "fixed failures")


def render(c, max_lines: int = MAX_LINES, code: int = None, items_code: int = None,
           rates: tuple = ({}, {}), full_reasons: bool = False) -> list:
    """The comparison as terminal lines: the compared timings and their geometric mean,
    then the categories of the report that hold items (the empty ones named on one line,
    or "nothing moved"), and the result; every name, id and reason from the files one
    line (suite.text.terminal), reasons shortened at a word boundary unless
    `full_reasons`. A failure's entry is followed by the command that reruns it
    (suite/reproduce.py). `rates`: (baseline, current) throughput of compute-bound items
    (`_rates`), shown after their times."""
    code = c.exit_code() if code is None else code
    lines = [f"compared: {c.n_common} items in both runs, {c.n_timed} timed in both; "
             f"{c.rule.describe()}"]
    lines += [f"environment differs: {terminal(e)}" for e in c.env_differences]
    if c.n_device_differs:
        lines.append(f"not compared: {c.n_device_differs} items timed in both runs on "
                     f"different devices ({terminal('; '.join(c.device_pairs))})")
    if c.n_flush_differs:
        lines.append(f"not compared: {c.n_flush_differs} items timed in both runs after "
                     f"different L2 flushes (l2_flush)")
    if c.overlaps:
        lines += _compared_table(c, max_lines, rates)

    def clip(text, limit=REASON_CHARS) -> str:
        return terminal(text) if full_reasons else shorten(terminal(text), limit)

    empty = []

    def section(title, entries, line, rerun=None):
        if not entries:
            empty.append(title.lower())
            return
        lines.append(f"\n{title} ({len(entries)}):")
        for e in entries[:max_lines]:
            lines.append("  " + line(e))
            if rerun and rerun(e):
                lines.append(f"      rerun: {terminal(rerun(e))}")
        if len(entries) > max_lines:
            lines.append(f"  ... and {len(entries) - max_lines} more")

    def timing(t):
        rate = _rate_text(t, rates)
        return (f"x{t.ratio:.3f}  p={t.p:.2g}  {terminal(t.case_id)}  [{terminal(t.impl)}]  "
                f"{_fmt_s(t.base_median_s)} -> {_fmt_s(t.cur_median_s)}  "
                f"({t.n_base}/{t.n_cur} samples)" + (f"  {rate}" if rate else ""))

    def verdict(v):
        before = v.before or "new case"
        return (f"{terminal(before)} -> {terminal(v.after)}  {terminal(v.case_id)}  "
                f"[{terminal(v.impl)}]  {clip(v.reason or '')}")

    def known_item(k):
        return (f"{terminal(k.verdict)}  {terminal(k.case_id)}  [{terminal(k.impl)}]  "
                f"declared: {clip(k.known_failure, 160)}")

    def known_group(g):
        op, impl, why, ks = g
        return f"{terminal(op)} [{terminal(impl)}]: {len(ks)} items: {clip(why)}"

    def presence(p):
        return f"{terminal(p.case_id)}  [{terminal(p.impl)}]  {terminal(p.verdict)}"

    def rerun(x):
        return x.rerun

    section("REGRESSIONS", sorted(c.regressions, key=lambda t: -t.ratio), timing)
    section("NEW FAILURES", list(c.new_failures), verdict, rerun)
    section("FAILING NEW CASES", list(c.failing_new_cases), verdict, rerun)
    section("UNEXPECTED PASSES", list(c.unexpected_passes), known_item, rerun)
    section("improvements", sorted(c.improvements, key=lambda t: t.ratio), timing)
    section("fixed failures", list(c.fixed_failures), verdict)
    section("known failures (expected)", _known_groups(c.known_failures), known_group)
    section("beyond the factor but not significant", c.uncertain, timing)
    section("too noisy to compare (spread or host load; not counted as timed)", list(c.noisy),
            lambda n: f"x{n.ratio:.3f}  {terminal(n.case_id)}  [{terminal(n.impl)}]  "
                      f"{terminal(n.reason)}")
    section("disappeared (baseline only)", list(c.disappeared), presence)
    section("new cases (current only)", list(c.new_cases), presence)
    if c.overlaps and all(m in empty for m in MOVES):
        moves = MOVES if c.n_timed else [m for m in MOVES if m in VERDICT_MOVES]
        what = "nothing moved" if c.n_timed else "no verdict moved (no timing compared)"
        lines.append(f"\n{what}: no {', '.join(moves[:-1])} or {moves[-1]} among the "
                     f"{c.n_common} items in both runs")
    elif empty:
        lines.append(f"\nnone: {', '.join(empty)}")
    lines.append("\n" + result_line(c, code, items_code))
    return lines


# -- machine-readable formats ----------------------------------------------------------------

CSV_COLUMNS = ("category", "op", "case_id", "impl", "case_group", "base_median_s",
               "cur_median_s", "ratio", "p", "n_base", "n_cur", "change", "before", "after",
               "reason", "known_failure", "base_tflops", "cur_tflops", "cur_frac_peak_flops",
               "rerun")


def _num(x):
    return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else x


def records(c, rates: tuple = ({}, {})) -> list:
    """One dict per item and category: every compared timing (category regression,
    improvement, uncertain or unchanged; a compute-bound item's TFLOP/s in each run and
    its current fraction of the peak, null otherwise), then the verdict categories (a
    failing or declared item with `rerun`, the command that reruns it alone)."""
    out = []
    for t in c.compared:
        base, cur = (r.get((t.op, t.case_id, t.impl)) for r in rates)
        out.append({"category": t.change.value, "op": t.op, "case_id": t.case_id,
                    "impl": t.impl, "case_group": t.case_group,
                    "base_median_s": _num(t.base_median_s), "cur_median_s": _num(t.cur_median_s),
                    "ratio": _num(t.ratio), "p": _num(t.p), "n_base": t.n_base,
                    "n_cur": t.n_cur, "change": t.change.value,
                    "base_tflops": _num(base.tflops) if base else None,
                    "cur_tflops": _num(cur.tflops) if cur else None,
                    "cur_frac_peak_flops": _num(cur.frac_peak) if cur else None})
    for category, items in (("new_failure", c.new_failures),
                            ("failing_new_case", c.failing_new_cases),
                            ("fixed", c.fixed_failures)):
        out += [{"category": category, "op": v.op, "case_id": v.case_id, "impl": v.impl,
                 "case_group": v.case_group, "before": v.before, "after": v.after,
                 "reason": v.reason, "rerun": v.rerun or None} for v in items]
    for category, items in (("unexpected_pass", c.unexpected_passes),
                            ("known_failure", c.known_failures)):
        out += [{"category": category, "op": k.op, "case_id": k.case_id, "impl": k.impl,
                 "case_group": k.case_group, "before": k.before, "after": k.verdict,
                 "reason": k.reason, "known_failure": k.known_failure,
                 "rerun": k.rerun or None} for k in items]
    for category, items in (("disappeared", c.disappeared), ("new_case", c.new_cases)):
        out += [{"category": category, "op": p.op, "case_id": p.case_id, "impl": p.impl,
                 "case_group": p.case_group,
                 ("before" if category == "disappeared" else "after"): p.verdict}
                for p in items]
    return out


def counts(c) -> dict:
    return {"common": c.n_common, "timed": c.n_timed, "timed_both": c.n_timed_both,
            "device_differs": c.n_device_differs, "flush_differs": c.n_flush_differs,
            "regressions": len(c.regressions), "improvements": len(c.improvements),
            "uncertain": len(c.uncertain), "new_failures": len(c.new_failures),
            "failing_new_cases": len(c.failing_new_cases),
            "unexpected_passes": len(c.unexpected_passes),
            "known_failures": len(c.known_failures), "fixed": len(c.fixed_failures),
            "disappeared": len(c.disappeared), "new_cases": len(c.new_cases),
            "noisy": len(c.noisy)}


RESULTS = {0: "ok", 1: "regressed", 3: "not_compared", EXIT_INCOMPLETE: "incomplete"}


def _reason(c, code: int, incomplete) -> str | None:
    """Why the gate did not look at everything: nothing compared, or the incomplete
    current run's files."""
    if code == 3:
        return c.vacuous_reason
    if code == EXIT_INCOMPLETE:
        return "; ".join(s.describe() for s in incomplete.get("current", ()))
    return None


def _state(s) -> dict:
    return {"path": str(s.path), "rows": s.rows, "planned": s.planned,
            "state": s.state.value, "text": s.describe()}


def geomean_doc(c) -> dict:
    """The geometric mean of the compared ratios (current / baseline), overall and per op:
    `ratio` null when no timing was compared."""
    def one(pair):
        ratio, n = pair
        return {"ratio": _num(ratio), "items": n}

    return dict(one(c.geomean), per_op={op: one(g) for op, g in c.geomean_per_op.items()})


def as_json(c, code: int, base=None, cur=None, incomplete=None) -> str:
    """`incomplete`: "baseline"/"current" -> the Completeness of each incomplete file."""
    incomplete = incomplete or {}
    doc = {"format": "bwd-suite-compare", "version": 1, "result": RESULTS[code],
           "exit_code": code, "reason": _reason(c, code, incomplete),
           "incomplete": {side: [_state(s) for s in incomplete.get(side, ())]
                          for side in ("baseline", "current")},
           "rule": {"factor": c.rule.factor, "alpha": c.rule.alpha,
                    "text": c.rule.describe()},
           "baseline": run_info(base) if base is not None else None,
           "current": run_info(cur) if cur is not None else None,
           "environment_differences": list(c.env_differences), "counts": counts(c),
           "geomean": geomean_doc(c), "items": records(c, _rates(base, cur))}
    return json.dumps(doc, indent=1, allow_nan=False)


def as_csv(c, base=None, cur=None) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n")
    w.writeheader()
    for r in records(c, _rates(base, cur)):
        w.writerow({k: ("" if v is None else (repr(v) if isinstance(v, float) else v))
                    for k, v in r.items()})
    return buf.getvalue()


def as_markdown(c, code: int, max_lines: int = MAX_LINES, base=None, cur=None,
                incomplete=None, items_code: int = None, full_reasons: bool = False) -> str:
    """The comparison for a pull-request comment: text from the files as plain-text cells
    (suite.text.markdown_cell), case ids and rerun commands as code spans, never as
    markup; reasons shortened at a word boundary unless `full_reasons`."""
    icon = {0: "ok", 1: "REGRESSED", 3: "NOT COMPARED", EXIT_INCOMPLETE: "INCOMPLETE"}[code]
    out = [f"**{markdown_cell(line)}**" for line in incomplete_lines(incomplete, code)]
    out += [""] if out else []
    out += [f"## Compare: {icon}", "", markdown_cell(result_line(c, code, items_code)), ""]
    if base is not None and cur is not None:
        out += [f"- baseline: {markdown_cell(describe_run(base))}",
                f"- current: {markdown_cell(describe_run(cur))}"]
    out += [f"- {c.n_common} items in both runs, {c.n_timed} timed in both; "
            f"{markdown_cell(c.rule.describe())}"]
    out += [f"- environment differs: {markdown_cell(e)}" for e in c.env_differences]
    out.append("")
    out += ["| category | items |", "|---|---:|"]
    out += [f"| {k.replace('_', ' ')} | {v} |" for k, v in counts(c).items()]
    mean = geomean_text(c)
    out += ["", markdown_cell(mean)] if mean else []

    def table(title, head, rows):
        if not rows:
            return
        out.extend(["", f"### {title} ({len(rows)})", "", "| " + " | ".join(head) + " |",
                    "|" + "---|" * len(head)])
        out.extend("| " + " | ".join(r) + " |" for r in rows[:max_lines])
        if len(rows) > max_lines:
            out.append(f"\n... and {len(rows) - max_lines} more")

    cell = markdown_cell

    def clip(text, limit=REASON_CHARS) -> str:
        return cell(text if full_reasons else shorten(terminal(text), limit))

    def rerun(x) -> str:
        return code_span(x.rerun) if x.rerun else ""

    rates = _rates(base, cur)

    def t_rows(ts):
        return [(cell(t.op), code_span(t.case_id), cell(t.impl), cell(_fmt_s(t.base_median_s)),
                 cell(_fmt_s(t.cur_median_s)), f"x{t.ratio:.3f}", f"{t.p:.2g}",
                 cell(_rate_text(t, rates))) for t in ts]

    th = ("op", "case", "impl", "baseline", "current", "ratio", "p", "TFLOP/s (compute bound)")
    vh = ("op", "case", "impl", "before", "now", "reason", "rerun")

    def v_rows(vs):
        return [(cell(v.op), code_span(v.case_id), cell(v.impl), cell(v.before or "new case"),
                 cell(v.after), clip(v.reason or ""), rerun(v)) for v in vs]

    kh = ("op", "case", "impl", "verdict", "declared", "rerun")

    def k_rows(ks):
        return [(cell(k.op), code_span(k.case_id), cell(k.impl), cell(k.verdict),
                 clip(k.known_failure), rerun(k)) for k in ks]

    table("Regressions", th, t_rows(sorted(c.regressions, key=lambda t: -t.ratio)))
    table("New failures", vh, v_rows(c.new_failures))
    table("Failing new cases", vh, v_rows(c.failing_new_cases))
    table("Unexpected passes", kh, k_rows(c.unexpected_passes))
    table("Improvements", th, t_rows(sorted(c.improvements, key=lambda t: t.ratio)))
    fixed = [r[:-1] for r in v_rows(c.fixed_failures)]  # passing now: nothing to rerun
    table("Fixed failures", vh[:-1], fixed)
    table("Known failures (expected)", ("op", "impl", "items", "declared"),
          [(cell(op), cell(impl), str(len(ks)), clip(why)) for op, impl, why, ks in
           _known_groups(c.known_failures)])
    table("Beyond the factor, not significant", th, t_rows(c.uncertain))
    if c.compared:  # the whole comparison, folded: the categories above are what moved
        shown = c.compared[:max_lines]
        out += ["", f"<details><summary>Compared timings ({len(c.compared)}; flagged first, "
                    f"then by distance from x1)</summary>", "",
                "| " + " | ".join(th + ("flag",)) + " |", "|" + "---|" * (len(th) + 1)]
        out += ["| " + " | ".join(r + (t.change.value,)) + " |"
                for r, t in zip(t_rows(shown), shown)]
        if len(c.compared) > len(shown):
            out.append(f"\n... and {len(c.compared) - len(shown)} more")
        out += ["", "</details>"]
    elif c.overlaps:
        out += ["", f"No timing compared: {cell(c.vacuous_reason or '')}"]
    return "\n".join(out) + "\n"


def incomplete_lines(incomplete, code: int) -> list:
    """The first lines of every format when a run did not finish its plan: the current
    run's decide the exit code (4, unless --allow-incomplete), the baseline's are stated."""
    incomplete = incomplete or {}
    lines = []
    for s in incomplete.get("current", ()):
        then = ("compare exits 4 (--allow-incomplete gates on its finished items)"
                if code == EXIT_INCOMPLETE else "only its finished items are compared "
                                                "(--allow-incomplete)")
        lines.append(f"INCOMPLETE current run: {terminal(s.describe())}: {then}")
    for s in incomplete.get("baseline", ()):
        lines.append(f"INCOMPLETE baseline run: {terminal(s.describe())}: the items it lacks "
                     f"show as new cases")
    return lines


def main(args) -> int:
    from bwd_suite.suite import regression
    from bwd_suite.suite.results import completeness, read_results

    rule = rule_from(args)
    from bwd_suite.suite.cli import at_least

    at_least(args, "max_lines", 0)
    base, cur = read_results([args.baseline]), read_results(args.current)
    for df, paths in ((base, [args.baseline]), (cur, args.current)):
        if df.empty:
            raise SuiteInputError(", ".join(map(str, paths)), "holds no result rows")
    incomplete = {side: tuple(s for s in completeness(paths) if s.incomplete)
                  for side, paths in (("baseline", [args.baseline]), ("current", args.current))}
    c = regression.compare(base, cur, rule)
    items_code = c.exit_code(allow_untimed=args.allow_untimed)
    code = EXIT_INCOMPLETE if incomplete["current"] and not args.allow_incomplete \
        else items_code
    first = incomplete_lines(incomplete, code)
    if args.format == "text":
        print("\n".join(first + [f"baseline: {terminal(describe_run(base))}",
                                  f"current:  {terminal(describe_run(cur))}"]))
        print("\n".join(render(c, args.max_lines, code, items_code, _rates(base, cur),
                               args.full_reasons)))
        return code
    if args.format == "json":
        sys.stdout.write(as_json(c, code, base, cur, incomplete) + "\n")
    elif args.format == "csv":
        sys.stdout.write(as_csv(c, base, cur))
    else:
        sys.stdout.write(as_markdown(c, code, args.max_lines, base, cur, incomplete,
                                     items_code, args.full_reasons))
    for line in first:  # beside the machine-readable output, as exit 3's line
        print(f"compare: {line}", file=sys.stderr)
    if code in (3, EXIT_INCOMPLETE):
        print(f"compare: {result_line(c, code, items_code)[len('result: '):]}",
              file=sys.stderr)
    return code
