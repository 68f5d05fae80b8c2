"""Implementations side by side: per case, each implementation's median time (and, for a
compute-bound item, its TFLOP/s and fraction of the measured compute peak) and its
speedup over a baseline implementation (baseline time / its time: above 1 is faster),
and per op the geometric mean of the speedups over every case where both timings are
valid.

A timing is valid when its item passed or failed as its implementation declares (a known
failure: Liger's loss, torch_fused's adamw; the time is the kernel's all the same): such a
speedup is shown, counted and marked (KNOWN_MARK), never dropped. An undeclared failure's
speedup is struck out and left out of the mean: a wrong result's time means nothing.

A speedup is marked faster or slower only when it passes x(1 +- SAME) and, where both
items kept samples, a two-sided Mann-Whitney U test of the samples gives p < ALPHA (the
regression rule's test, suite.regression); otherwise the two are level within the run's
noise, which is what "at least as fast as" can be judged by."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Optional, Union

import pandas as pd

from bwd_suite.reports import fmt
from bwd_suite.reports.items import Items, case_label, compute_bound
from bwd_suite.suite.outcomes import Verdict
from bwd_suite.suite.regression import Rule, kept_samples, mann_whitney_u


SAME = 0.01  # speedups within 1 % of x1 are shown neutral
ALPHA = Rule().alpha  # and so are larger ones whose samples do not differ significantly
MIN_SAMPLES = 3  # per side, for the test (fewer: the threshold alone decides)
YARDSTICK = "torch_ref"  # suite.opspec.OpSpec.yardstick (no op sets another; no torch here)
KNOWN_MARK = "†"  # beside a speedup where either side is a declared known failure


@dataclass(frozen=True)
class BaselineChoice:
    """--baseline-impl: an implementation per op (`op=impl`) and a bare name for every
    other op that has it."""

    per_op: Mapping[str, str] = field(default_factory=dict)
    bare: Optional[str] = None

    def wanted(self, op: str) -> Optional[str]:
        return self.per_op.get(op, self.bare)

    def explicit(self, op: str) -> bool:
        return op in self.per_op

    def names(self) -> set:
        return set(self.per_op.values()) | ({self.bare} if self.bare else set())


def parse_baseline_impl(text: Union[None, str, Mapping, BaselineChoice]) -> BaselineChoice:
    """`causal_conv1d=dao,softmax=liger`, a bare `torch_tiled`, or both
    (`torch_tiled,softmax=liger`); ValueError on a malformed entry."""
    if isinstance(text, BaselineChoice):
        return text
    if text is None or text == "":
        return BaselineChoice()
    if isinstance(text, Mapping):
        return BaselineChoice(per_op=dict(text))
    per_op, bare = {}, None
    for entry in (e.strip() for e in str(text).split(",")):
        if not entry:
            raise ValueError(f"empty entry in {text!r}")
        if "=" in entry:
            op, _, impl = (x.strip() for x in entry.partition("="))
            if not op or not impl:
                raise ValueError(f"{entry!r} is not OP=IMPL")
            if op in per_op and per_op[op] != impl:
                raise ValueError(f"two implementations for {op}: {per_op[op]}, {impl}")
            per_op[op] = impl
        elif bare is not None and bare != entry:
            raise ValueError(f"two bare names: {bare}, {entry} (name the op: OP=IMPL)")
        else:
            bare = entry
    return BaselineChoice(per_op=per_op, bare=bare)


def rule_text(alpha: float) -> str:
    return (f"A speedup is coloured faster or slower only beyond ×{1 - SAME:g}–×{1 + SAME:g} "
            f"and when a two-sided Mann-Whitney U test of the two items' kept samples gives "
            f"p < {alpha:g} (hover a speedup for its p); otherwise the two are level within "
            f"this run's noise.")


@dataclass(frozen=True)
class Cell:
    median: fmt.Num
    speedup: fmt.Num
    valid: bool  # both timings valid: passed, or failed as declared (a known failure)
    href: str
    tone: str  # "faster", "slower" or "" (the baseline itself, no speedup, or level)
    p: fmt.Num  # Mann-Whitney p of the two items' samples (missing: too few samples)
    # a compute-bound item's rate and its fraction of the compute peak (missing otherwise)
    tflops: fmt.Num = fmt.NONE
    frac_peak: fmt.Num = fmt.NONE
    known: bool = False  # a valid speedup where either side is a declared known failure


@dataclass(frozen=True)
class Row:
    case_id: str
    label: str
    bytes: fmt.Num
    cells: tuple  # Optional[Cell] per implementation


@dataclass(frozen=True)
class OpSpeedup:
    op: str
    baseline: str
    impls: tuple
    rows: tuple
    geomean: tuple  # fmt.Num per implementation
    n_cases: tuple  # fmt.Num per implementation: cases in the geometric mean
    fallback: bool  # the requested baseline has no timed results for this op
    rule: str  # when a speedup counts as faster or slower, for the page
    requested: Optional[str] = None  # what --baseline-impl asked for this op
    n_known: tuple = ()  # int per implementation: of n_cases, those marked KNOWN_MARK
    mark: str = KNOWN_MARK


def choose_baseline(items: Items, op: str, requested=None) -> str:
    """The implementation --baseline-impl asks for this op when it has timed results,
    else the op's yardstick (torch_ref), else its first reference implementation, else
    its first (all among the implementations with timed results, when any has)."""
    wanted = parse_baseline_impl(requested).wanted(op)
    rows = items.rows[items.rows["op"] == op]
    timed = set(rows.loc[rows["timed"], "impl"]) if "timed" in rows else set()
    impls = [i for i in items.impls(op) if i in timed] or items.impls(op)
    if wanted in impls:
        return wanted
    if YARDSTICK in impls:
        return YARDSTICK
    kinds = rows.drop_duplicates("impl").set_index("impl")["impl_kind"]
    return next((i for i in impls if kinds.get(i) == "reference"), impls[0])


def _fallback(items: Items, op: str, choice: BaselineChoice, base: str) -> bool:
    """Whether to say that this op's speedups are not against what was asked: an op=impl
    entry it cannot honour, or a bare name this op holds untimed or no op holds at all (a
    bare name other ops hold applies to those alone)."""
    wanted = choice.wanted(op)
    if not wanted or wanted == base:
        return False
    if choice.explicit(op):
        return True
    in_op = wanted in set(items.rows.loc[items.rows["op"] == op, "impl"])
    return in_op or wanted not in set(items.rows["impl"])


def p_value(samples, base_samples) -> Optional[float]:
    """Two-sided Mann-Whitney U p of two items' kept samples; None with fewer than
    MIN_SAMPLES on either side."""
    a, b = kept_samples(samples), kept_samples(base_samples)
    if len(a) < MIN_SAMPLES or len(b) < MIN_SAMPLES:
        return None
    return mann_whitney_u(a, b).p


def tone(speed: Optional[float], p: Optional[float], alpha: float = ALPHA) -> str:
    """"faster" or "slower" when the speedup passes x(1 +- SAME) and is significant at
    alpha (or untestable); "" when level."""
    if speed is None or abs(speed - 1) < SAME or (p is not None and p >= alpha):
        return ""
    return "faster" if speed > 1 else "slower"


def _geomean(values) -> Optional[float]:
    v = [x for x in values if x and x > 0 and math.isfinite(x)]
    return math.exp(sum(map(math.log, v)) / len(v)) if v else None


def build(items: Items, requested=None, alpha: float = ALPHA) -> tuple:
    """`requested`: --baseline-impl (a BaselineChoice, its text, or None)."""
    choice = parse_baseline_impl(requested)
    out = []
    for op in items.ops():
        impls = items.impls(op)
        rows = items.rows[(items.rows["op"] == op) & items.rows["timed"]]
        if rows.empty or len(impls) < 2:
            continue
        base = choose_baseline(items, op, choice)
        t = rows.pivot(index="case_id", columns="impl", values="time_median_s")
        # a weak-yardstick item computes as well as the yardstick: its time counts
        ok = rows.assign(ok=rows["verdict"].isin((Verdict.PASS, Verdict.WEAK_YARDSTICK))
                         | rows["expected"]).pivot(
            index="case_id", columns="impl", values="ok").fillna(False).astype(bool)
        known = rows.pivot(index="case_id", columns="impl", values="expected") \
            .fillna(False).astype(bool)
        geo, n, n_known = [], [], []
        for i in impls:
            if i == base or i not in t or base not in t:
                geo.append(fmt.NONE)
                n.append(fmt.count(0))
                n_known.append(0)
                continue
            both = t[i].notna() & t[base].notna() & ok[i] & ok[base]
            s = (t.loc[both, base] / t.loc[both, i]).tolist()
            geo.append(fmt.times(_geomean(s)))
            n.append(fmt.count(len(s)))
            n_known.append(int((both & (known[i] | known[base])).sum()))
        times, passed, declared = t.to_dict(), ok.to_dict(), known.to_dict()  # impl -> case
        samples = rows.pivot(index="case_id", columns="impl", values="time_samples_s").to_dict() \
            if "time_samples_s" in rows else {}
        compute = rows[rows["bound"].map(compute_bound).astype(bool)]
        rates = {(c, i): (t, f) for c, i, t, f in zip(compute["case_id"], compute["impl"],
                                                      compute["tflops"],
                                                      compute["frac_peak_flops"])}
        shown = rows[rows["shown"]]
        shared = shown["case_id"].map(shown["case_id"].value_counts()) >= 2  # timed twice
        by_case = shown[shared].drop_duplicates("case_id").sort_values(
            ["bytes", "case_id"], ascending=[False, True])
        anchors = dict(zip(zip(shown["case_id"], shown["impl"]), shown["anchor"]))
        listed = []
        for r in by_case[["case_id", "case_group", "bytes"]].itertuples():
            cells = []
            for i in impls:
                med = times.get(i, {}).get(r.case_id)
                if med is None or pd.isna(med):
                    cells.append(None)
                    continue
                b = times.get(base, {}).get(r.case_id)
                valid = bool(passed[i][r.case_id] and passed.get(base, {}).get(r.case_id))
                marked = valid and i != base and bool(
                    declared[i][r.case_id] or declared.get(base, {}).get(r.case_id))
                speed = b / med if i != base and b and not pd.isna(b) else None
                p = None if speed is None else p_value(
                    samples.get(i, {}).get(r.case_id), samples.get(base, {}).get(r.case_id))
                rate, frac = rates.get((r.case_id, i), (None, None))
                cells.append(Cell(median=fmt.seconds(med), speedup=fmt.times(speed),
                                  valid=valid, href=f"#r{anchors.get((r.case_id, i), '')}",
                                  tone=tone(speed, p, alpha), p=fmt.pvalue(p),
                                  tflops=fmt.rate(rate), frac_peak=fmt.percent(frac),
                                  known=marked))
            label = f"{r.case_group}/{case_label(op, r.case_group, r.case_id)}"
            listed.append(Row(r.case_id, label, fmt.nbytes(r.bytes), tuple(cells)))
        out.append(OpSpeedup(op=op, baseline=base, impls=tuple(impls), rows=tuple(listed),
                             geomean=tuple(geo), n_cases=tuple(n),
                             fallback=_fallback(items, op, choice, base),
                             rule=rule_text(alpha), requested=choice.wanted(op),
                             n_known=tuple(n_known)))
    return tuple(out)
