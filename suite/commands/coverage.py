"""Coverage per implementation of a run (one or more results files): per parameter, the
values each implementation ran (pass or fail: its outputs were compared) against the
values the op's cases offered; per pair of parameters, the value pairs it ran, the offered
ones it declared unsupported or did not run otherwise, and the pairs of values it runs
that no case combined although a valid case it supports could ("never exercised
together": the gaps the profile leaves in its supported feature space). Numeric
parameters with many values are binned for the pairs (powers of two, and mod 8).

A view, not a gate: exit 0 whatever it finds, 2 on bad input (docs/coverage.md).

Op, implementation and parameter names, values, reasons and case ids all come from the
results files: text lines go through suite.text.terminal whole, markdown cells through
`_md`, so that no control character reaches the terminal raw.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from bwd_suite.suite.errors import SuiteInputError, did_you_mean
from bwd_suite.suite.text import terminal

HELP = ("per implementation, the parameter values and value pairs it ran against those "
        "the cases offered, and the pairs never exercised together")
FORMATS = ("text", "json", "markdown")
MAX_LINES = 20  # missing pairs and values listed per implementation in text and markdown


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("results", type=Path, nargs="+", metavar="RESULTS",
                        help="results: parquet files or folders of them (several runs "
                             "combine; where two hold the same item the later run's is used)")
    parser.add_argument("--impl", metavar="NAMES",
                        help="comma-separated implementation names (default: every one in "
                             "the results)")
    parser.add_argument("--op", metavar="OP", help="only this op (default: every op)")
    parser.add_argument("--format", choices=FORMATS, default="text",
                        help="text (default), json (one document, every missing pair "
                             "listed), markdown (for a pull request)")
    parser.add_argument("--max-lines", type=int, default=MAX_LINES, metavar="N",
                        help=f"missing pairs listed per implementation, and missing values "
                             f"per parameter, in text and markdown (default {MAX_LINES}; "
                             f"counts are always complete, json lists every one)")


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'s' * (n != 1)}"


def _values(labels, limit: int) -> str:
    shown = ", ".join(labels[:limit])
    return shown + (f" and {len(labels) - limit} more" if len(labels) > limit else "")


def items_line(c) -> str:
    """`620 items: 600 ran (590 pass, 10 fail), 20 unsupported`."""
    verdicts = dict(c.verdicts)
    ran = [f"{verdicts[v]} {v}" for v in ("pass", "fail") if verdicts.get(v)]
    rest = [f"{n} {v}" for v, n in c.verdicts if v not in ("pass", "fail")]
    text = f"{_plural(c.n_items, 'item')}: {c.n_ran} ran" + (f" ({', '.join(ran)})" if ran
                                                              else "")
    return text + "".join(f", {r}" for r in rest)


def pairs_line(p) -> str:
    """The value-pair counts of one implementation, one line."""
    def apart(n, of):
        return f" ({of:,} of values it runs apart)" if n and of else ""

    return (f"{p.offered:,} offered, {p.ran:,} ran, {p.unsupported:,} unsupported"
            f"{apart(p.unsupported, p.unsupported_pair)}, {p.not_run:,} not run otherwise"
            f"{apart(p.not_run, p.not_run_pair)}; of the values it ran, {p.not_offered:,} "
            f"pairs no case offered: {p.never_together:,} never exercised together, "
            f"{p.outside:,} outside its features, {p.invalid:,} not a valid case")


def missing_values(pc, limit: int) -> str:
    """The offered values it did not run, grouped by why: `5, 8 (unsupported: widths 2-4
    only); 6 (error)`; at most `limit` values."""
    groups: dict = {}
    for m in pc.missing:
        groups.setdefault((m.why, m.reason), []).append(m.value)
    parts, left = [], limit
    for (why, reason), values in groups.items():
        if left <= 0:
            break
        why_text = f"{why}: {reason[:100]}" if reason else why
        parts.append(f"{', '.join(values[:left])} ({why_text})")
        left -= len(values[:left])
    hidden = len(pc.missing) - (limit - max(left, 0))
    return "; ".join(parts) + (f"; and {hidden} more" if hidden > 0 else "")


# the missing pairs, by category, as listed
LISTINGS = (("never together", "never exercised together"),
            ("unsupported", "offered, declared unsupported, though it runs each value"),
            ("not run", "offered, not run (error, timeout or no item), though it runs each "
                        "value"))


def gap_line(g) -> str:
    items = f"{_plural(g.n_items, 'item')}: " if g.n_items else ""
    return f"{g.text}  {items}{g.note[:160]}"


def _one_line(entry: str) -> str:
    """An entry of the text output as one terminal line: every character that came from
    the results made visible; a leading newline is the layout's blank line, kept."""
    blank = entry.startswith("\n")
    return "\n" * blank + terminal(entry[blank:])


def render_text(cov, max_lines: int) -> list:
    lines = [f"coverage of {_plural(cov.n_rows, 'item')}: params, the values each "
             f"implementation ran (pass or fail) / the values the cases offered; pairs, "
             f"the value pairs of two parameters"]
    binned = [b for b in cov.binning if b.how != "exact"]
    if binned:
        lines.append("binned for the pairs: " + "; ".join(
            f"{b.op}.{b.param} ({b.n_offered} values: {b.how})" for b in binned))
    for c in cov.impls:
        kind = f" ({c.impl_kind})" if c.impl_kind else ""
        lines.append(f"\n{c.op} / {c.impl}{kind}: {items_line(c)}")
        if c.unsupported_reasons:
            lines.append("  unsupported: " + "; ".join(
                f"{n} {r[:120]}" for r, n in c.unsupported_reasons[:3])
                + (f"; and {len(c.unsupported_reasons) - 3} more reasons"
                   if len(c.unsupported_reasons) > 3 else ""))
        if not c.n_ran:
            lines.append(f"  ran nothing: none of its {_plural(len(c.params), 'parameter')}"
                         f" ran a value")
            continue
        full = [p for p in c.params if p.complete]
        if full:
            lines.append("  params, every offered value ran: " + ", ".join(
                f"{p.param} {len(p.offered)}" for p in full))
        for p in c.params:
            if p.missing:
                lines.append(f"  param {p.param}: {len(p.ran)}/{len(p.offered)} values "
                             f"ran; not run: {missing_values(p, max_lines)}")
        lines.append(f"  value pairs ({c.pairs.feature_pairs} pairs of parameters): "
                     f"{pairs_line(c.pairs)}")
        worst = sorted((f for f in c.feature_pairs if f.counts.never_together),
                       key=lambda f: (-f.counts.never_together, f.a, f.b))
        if worst:
            lines.append("  most never together: " + "; ".join(
                f"{f.a} x {f.b} ({f.counts.never_together} never together, "
                f"{f.counts.ran} ran)" for f in worst[:5]))
        for category, title in LISTINGS:
            found = [g for g in c.missing_pairs if g.category == category]
            if not found:
                continue
            n = len(found)
            lines.append(f"  {title} (the first {max_lines} of {n:,}):" if n > max_lines
                         else f"  {title} ({n}):")
            lines += [f"    {gap_line(g)}" for g in found[:max_lines]]
    gaps = [c for c in cov.impls if c.pairs.never_together]
    lines.append("")
    if gaps:
        lines.append("supported feature space left unexercised (pairs of values each "
                     "implementation runs, never together):")
        for c in gaps:
            first = "; ".join(g.text for g in c.gaps[:3])
            lines.append(f"  {c.op} / {c.impl}: {_plural(c.pairs.never_together, 'pair')}, "
                         f"e.g. {first}")
    else:
        lines.append("every implementation ran every pair of the values it runs that a "
                     "valid case it supports could hold")
    return [_one_line(line) for line in lines]


def _md(text) -> str:
    """Text for a markdown table cell or code span: a newline as a space, other control
    characters as visible escapes, backslashes and pipes escaped."""
    text = terminal(str(text or "").replace("\n", " "))
    return text.replace("\\", "\\\\").replace("|", "\\|")


def render_markdown(cov, max_lines: int) -> str:
    out = ["## Coverage", "",
           f"{_plural(cov.n_rows, 'item')}. Params: values ran (pass or fail) / offered by "
           f"the cases. Pairs: value pairs of two parameters.", ""]
    binned = [b for b in cov.binning if b.how != "exact"]
    if binned:
        out += ["Binned for the pairs: " + "; ".join(
            f"`{b.op}.{b.param}` ({b.n_offered} values: {b.how})" for b in binned), ""]
    out += ["| op | implementation | items | ran | params fully run | pairs ran / offered "
            "| unsupported pairs | never together |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for c in cov.impls:
        full = sum(p.complete for p in c.params)
        out.append(f"| {_md(c.op)} | {_md(c.impl)} | {c.n_items} | {c.n_ran} | "
                   f"{full}/{len(c.params)} | {c.pairs.ran}/{c.pairs.offered} | "
                   f"{c.pairs.unsupported} | {c.pairs.never_together} |")
    for c in cov.impls:
        out += ["", f"### {_md(c.op)} / {_md(c.impl)}", "", _md(items_line(c)), ""]
        missing = [p for p in c.params if p.missing]
        if missing:
            out += ["| param | ran / offered | not run |", "|---|---:|---|"]
            out += [f"| `{_md(p.param)}` | {len(p.ran)}/{len(p.offered)} | "
                    f"{_md(missing_values(p, max_lines))} |" for p in missing]
            out.append("")
        else:
            out += ["Every offered value of every parameter ran.", ""]
        out += [f"Pairs: {_md(pairs_line(c.pairs))}."]
        for category, title in LISTINGS:
            found = [g for g in c.missing_pairs if g.category == category]
            if not found:
                continue
            out += ["", f"{title.capitalize()} ({len(found):,}):", "",
                    "| pair | items | note |", "|---|---:|---|"]
            out += [f"| `{_md(g.text)}` | {g.n_items} | {_md(g.note[:160])} |"
                    for g in found[:max_lines]]
            if len(found) > max_lines:
                out.append(f"\n... and {len(found) - max_lines:,} more")
    return "\n".join(out) + "\n"


def as_json(cov, sources) -> str:
    def impl(c):
        d = asdict(c)
        d["n_ran"] = c.n_ran
        d["verdicts"] = dict(c.verdicts)
        d["unsupported_reasons"] = [{"reason": r, "n": n} for r, n in c.unsupported_reasons]
        for p, raw in zip(d["params"], c.params):
            p["complete"] = raw.complete
        return d

    doc = {"format": "bwd-suite-coverage", "version": 1,
           "sources": [str(s) for s in sources], "items": cov.n_rows,
           "binning": [asdict(b) for b in cov.binning],
           "implementations": [impl(c) for c in cov.impls]}
    return json.dumps(doc, indent=1, allow_nan=False)


def select(df, op, impl_text):
    """The rows of --op (checked against the results) and the --impl names (likewise)."""
    if op is not None:
        ops = set(map(str, df["op"]))
        if op not in ops:
            raise SuiteInputError("--op", did_you_mean(op, ops))
        df = df[df["op"] == op]
    names = None
    if impl_text is not None:
        names = [n.strip() for n in impl_text.split(",") if n.strip()]
        if not names:
            raise SuiteInputError("--impl", "names no implementation")
        known = set(map(str, df["impl"]))
        for n in names:
            if n not in known:
                raise SuiteInputError("--impl", did_you_mean(n, known))
    return df, names


def main(args) -> int:
    from bwd_suite.suite import coverage
    from bwd_suite.suite.results import read_results

    from bwd_suite.suite.cli import at_least

    at_least(args, "max_lines", 0)
    df = read_results(args.results)
    if df.empty:
        raise SuiteInputError(", ".join(map(str, args.results)), "holds no result rows")
    df, names = select(df, args.op, args.impl)
    cov = coverage.compute(df, impls=names)
    if args.format == "json":
        sys.stdout.write(as_json(cov, args.results) + "\n")
    elif args.format == "markdown":
        sys.stdout.write(render_markdown(cov, args.max_lines))
    else:
        print("\n".join(render_text(cov, args.max_lines)))
    return 0
