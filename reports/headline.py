"""The page's first screen (issue 40): the gate's verdict in one line with its counts and
the worst items named, and the run's identity (commit, device, profile) in one line.

With a baseline the verdict is the CI gate's (`compare`): regressed, not compared, or no
regressions; its counts are the changes' (regressions, new failures, unexpected passes,
improvements, known failures). Without one it is the run's own: failed when an item fails
undeclared or a declared failure passes, else passed. Each count links to its listing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import pandas as pd

from bwd_suite.reports.items import Items

MAX_WORST = 3  # items named on the first screen; the listings hold the rest
MAX_VALUES = 3  # distinct values of one identity field shown before "and N more"


@dataclass(frozen=True)
class Count:
    key: str  # the listing's key: regressions, new-failures, failures, ...
    n: int
    text: str  # "1 regression", "26 known failures (expected)"
    href: str  # where the items are listed ("" when there are none)
    tone: str  # "bad": fails the gate; "good": an improvement; "" otherwise


@dataclass(frozen=True)
class Worst:
    text: str  # "causal_conv1d/targets/B8-... [torch_tiled] ×1.31"
    href: str


@dataclass(frozen=True)
class Gate:
    tone: str  # "bad", "warn" or "ok" (the changes' banner, or the run's own)
    verdict: str  # "Regressed", "Not compared", "No regressions", "Failed", "Passed"
    why: str  # what the verdict rests on, one clause (the verdict's tooltip)
    counts: tuple  # Count
    worst: tuple  # Worst, at most MAX_WORST
    note: str = ""  # shown beside the verdict where the counts do not say it


@dataclass(frozen=True)
class Identity:
    fields: tuple  # (label, value): commit, device, profile, items, started
    baseline: tuple = ()  # the same of the baseline, without its start


@dataclass(frozen=True)
class Headline:
    gate: Gate
    identity: Identity


def _plural(n: int, one: str, many: str) -> str:
    return f"{n:,} {one if n == 1 else many}"


def _count(key, n, one, many, href, bad=True, good=False, suffix="") -> Count:
    tone = "bad" if bad and n else ("good" if good and n else "")
    return Count(key, n, _plural(n, one, many) + suffix, href if n else "", tone)


def _item_hrefs(its: Items) -> dict:
    """(op, case_id, impl) -> the item's failure entry, else its detail row (listed items)."""
    r = its.rows[its.rows["shown"]]
    return {(op, case, impl): f"#f{a}" if entry else f"#{a}"
            for op, case, impl, a, entry in zip(r["op"], r["case_id"], r["impl"], r["anchor"],
                                                r["entry"])}


def _round_robin(lists, n: int) -> list:
    """The first of each list, then the second of each, ...: n in all."""
    out, k = [], 0
    while len(out) < n and any(k < len(x) for x in lists):
        out += [x[k] for x in lists if k < len(x)]
        k += 1
    return out[:n]


def _with_baseline(changes, its: Items) -> Gate:
    listed = {x.key: x for x in changes.listings}

    def n(key):
        return listed[key].n_total if key in listed else 0

    counts = [_count("regressions", n("regressions"), "regression", "regressions",
                     "#changes-regressions"),
              _count("new-failures", n("new-failures"), "new failure", "new failures",
                     "#changes-new-failures")]
    if n("failing-new-cases"):  # rare: named only when there are some
        counts.append(_count("failing-new-cases", n("failing-new-cases"), "failing new case",
                             "failing new cases", "#changes-failing-new-cases"))
    counts += [_count("unexpected-passes", n("unexpected-passes"), "unexpected pass",
                      "unexpected passes", "#changes-unexpected-passes"),
               _count("improvements", n("improvements"), "improvement", "improvements",
                      "#changes-improvements", bad=False, good=True),
               _count("known-failures", changes.n_known, "known failure", "known failures",
                      "#changes-known-failures", bad=False, suffix=" (expected)")]
    hrefs = _item_hrefs(its)

    def named(key, what):
        rows = listed[key].rows if key in listed else ()
        return [Worst(f"{r.case_id} [{r.impl}] {what(r)}",
                      hrefs.get((r.op, r.case_id, r.impl), f"#changes-{key}")
                      if key != "regressions" else "#changes-regressions") for r in rows]

    worst = _round_robin([named("regressions", lambda r: r.ratio.text),
                          named("new-failures", lambda r: r.after),
                          named("failing-new-cases", lambda r: f"{r.after} (new case)"),
                          named("unexpected-passes", lambda r: "unexpected pass")], MAX_WORST)
    if changes.gate_failed:
        verdict, why = "Regressed", ("a significant slowdown, a new failure, a failing new "
                                     "case or an unexpected pass")
    elif changes.vacuous:
        verdict, why = "Not compared", f"no timed item could be compared ({changes.vacuous})"
    else:
        verdict, why = "No regressions", "no regressions and no new failures"
    return Gate(changes.tone, verdict, why, tuple(counts), tuple(worst),
                note=why if changes.vacuous and not changes.gate_failed else "")


def _without_baseline(its: Items, baseline_given: bool) -> Gate:
    rows = its.rows
    n_bad, n_xpass, n_known = (int(rows[k].sum()) for k in ("unexpected", "xpass", "expected"))
    counts = (_count("failures", n_bad, "failure", "failures", "#failures"),
              _count("unexpected-passes", n_xpass, "unexpected pass", "unexpected passes",
                     "#unexpected-passes"),
              _count("known-failures", n_known, "known failure", "known failures",
                     "#known-failures", bad=False, suffix=" (expected)"))
    # the worst first: errors and timeouts, then failures, each sweep's first cases first
    bad = rows[rows["unexpected"] | rows["xpass"]].sort_values(
        ["severity", "case_rank"], kind="stable").head(MAX_WORST)
    hrefs = _item_hrefs(its)
    worst = tuple(Worst(f"{r.case_id} [{r.impl}] "
                        + ("unexpected pass" if r.xpass else str(r.verdict)),
                        hrefs.get((r.op, r.case_id, r.impl), "#failures"))
                  for r in bad.itertuples())
    against = ("the baseline shares no (op, case, implementation) with these results"
               if baseline_given else "no baseline given, timings not compared")
    if n_bad or n_xpass:
        return Gate("bad", "Failed", "items fail undeclared or declared failures pass; "
                    + against, counts, worst, note=against)
    return Gate("warn" if baseline_given else "ok", "Not compared" if baseline_given
                else "Passed", against, counts, worst, note=against)


def _values(df: Optional[pd.DataFrame], col: str) -> str:
    if df is None or col not in df:
        return ""
    v = sorted(map(str, df[col].dropna().unique()))
    more = f" and {len(v) - MAX_VALUES} more" if len(v) > MAX_VALUES else ""
    return ", ".join(v[:MAX_VALUES]) + more


def _started(df: pd.DataFrame) -> str:
    """The first run's start, to the minute."""
    if "run_started" not in df:
        return ""
    s = sorted(map(str, df["run_started"].dropna().unique()))
    return s[0][:16].replace("T", " ") if s else ""


def identity(df: Optional[pd.DataFrame], n_items: Optional[int] = None) -> tuple:
    """(label, value) of a run, or of the runs combined: commit, device, profile, items
    (`n_items`, else the rows) and start; empty values left out."""
    if df is None:
        return ()
    runs = df["run_id"].nunique() if "run_id" in df else 1
    n_items = len(df) if n_items is None else n_items
    fields = (("commit", _values(df, "git_commit")),
              ("device", _values(df, "device_name") or _values(df, "device")),
              ("profile", _values(df, "profile")),
              ("items", f"{n_items:,}" + (f" from {runs} runs" if runs > 1 else "")),
              ("started", _started(df)))
    return tuple((k, v) for k, v in fields if v)


def build(its: Items, changes, baseline_given: bool, current: pd.DataFrame,
          baseline: Optional[pd.DataFrame]) -> Headline:
    """`changes`: the report's changes.Changes (None without a baseline that shares items)."""
    gate = _with_baseline(changes, its) if changes is not None else \
        _without_baseline(its, baseline_given)
    base = tuple((k, v) for k, v in identity(baseline) if k != "started")
    return Headline(gate, Identity(identity(current, len(its.rows)), base))
