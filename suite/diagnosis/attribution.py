"""Across a run (`diagnose_run`, for the mutants command and the report): per
implementation, each cause gets the log-likelihood of what was seen under "this is the
bug" (naive Bayes):

    items: a failing item naming n candidates, c among them   log(1/n)
           a failing item whose candidates leave c out        log(MISSED)
    features: items with the features c needs fail at a rate p (estimated, Laplace),
           the others at OUTSIDE                               log p or log(1-p), ...

so a cause needing SiLU and bias beats one needing SiLU alone when SiLU without bias
passes, and a single failing item without the needed features costs log(OUTSIDE). The
best cause is named only when failing items name it (SUPPORT); else "unclassified".
"""

from __future__ import annotations

import enum
import math
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, Optional, Sequence

from bwd_suite.suite import registry
from bwd_suite.suite.diagnosis import hypotheses
from bwd_suite.suite.diagnosis.axis_pattern import plural, remainder_periods
from bwd_suite.suite.diagnosis.evidence import Evidence, candidates, output_wrong
from bwd_suite.suite.diagnosis.vocabulary import DiagnosisSpec, Feature
from bwd_suite.suite.outcomes import Verdict

if TYPE_CHECKING:
    from bwd_suite.suite.rows import ResultRow

# Cross-case likelihood: the chance that the rules miss the true cause of a failing item,
# and that an item without the features a cause needs fails because of it anyway.
MISSED = 0.05
OUTSIDE = 0.01
# The run-level cause must be a candidate of at least this share of the failing items
# (and of one at least); otherwise the run is unclassified.
SUPPORT = 0.1


class EffectKind(enum.Enum):
    ONLY_WITH = "only_with"  # every failing item has the feature, some passing ones lack it
    NEVER_WITH = "never_with"  # no failing item has it, some passing ones do
    GROWS = "grows"  # the error grows with a numeric feature over the failing items


@dataclass(frozen=True)
class FeatureEffect:
    """A claim about how failing depends on one feature, with its contrast: the counts
    are over the comparable items only (`comparable`), so that "fails only with X" says
    how many cases without X, alike in everything the failures share, passed."""

    feature: str
    kind: EffectKind
    words: str
    n_fail_with: int = 0
    n_with: int = 0
    n_fail_without: int = 0
    n_without: int = 0
    rho: Optional[float] = None  # rank correlation, for "grows"
    n_trend: int = 0  # failing items the rank correlation is over, for "grows"

    def phrase(self) -> str:
        if self.kind is EffectKind.GROWS:
            return (f"error grows with {self.words} (rank corr. {self.rho:.2f} over "
                    f"{self.n_trend} failing items)")
        pre = "fails only" if self.kind is EffectKind.ONLY_WITH else "never fails"
        return (f"{pre} {self.words} (fails {self.n_fail_with} of {self.n_with} comparable "
                f"cases with it, {self.n_fail_without} of {self.n_without} without)")


@dataclass(frozen=True)
class CauseScore:
    cause: str
    votes: float  # sum over failing items of 1/(number of candidates) where named
    consistency: float  # failing items having the features the cause needs / failing items
    coverage: float  # failing items with those features / all items with them
    score: float  # log-likelihood of the run's items under this cause (higher is better)
    support: int = 0  # failing items that name it among their candidates


@dataclass(frozen=True)
class RunDiagnosis:
    op: str
    impl: str
    n_items: int  # items compared (pass or fail)
    n_failed: int
    cause: Optional[str]  # None: survived, or nothing matched
    title: str
    text: str  # one line
    scores: tuple = ()  # CauseScore, best first
    effects: tuple = ()  # FeatureEffect


def _spearman(xs: Sequence[float], ys: Sequence[float]) -> float:
    def ranks(v):
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        i = 0
        while i < len(order):  # average ranks of ties
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2
            i = j + 1
        return r
    rx, ry = ranks(xs), ranks(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sx = math.sqrt(sum((a - mx) ** 2 for a in rx))
    sy = math.sqrt(sum((b - my) ** 2 for b in ry))
    return cov / (sx * sy) if sx and sy else 0.0


# a numeric feature needs this many failing items and distinct values to show a trend
MIN_TREND_ITEMS, MIN_TREND_VALUES, MIN_TREND_RHO = 5, 4, 0.6


def _decides(ft: Feature, about: str) -> bool:
    """The feature is defined through `about` (Feature.implies): fixed by it."""
    return about in ft.implies or f"not {about}" in ft.implies


def comparable(spec: DiagnosisSpec, features: Sequence[Mapping], failed: Sequence[bool],
               split: Sequence[bool], about: Optional[str] = None) -> list[bool]:
    """Which items a claim about `split` (the claim's condition, yes or no per item) may be
    contrasted on: those that agree with the failing items on every boolean feature all
    of them share, but for the features the condition itself decides (`about`, the
    features defined through it, and any that equals the condition, or its negation, on
    every item: the run cannot tell those from it). So "fails only with more than one row"
    is contrasted on single-row cases with dropout when every failure has dropout, and
    there are none: no claim."""
    bad = [f for f, b in zip(features, failed) if b]
    shared = {}
    for ft in spec.features:
        if ft.numeric or ft.name == about or (about is not None and _decides(ft, about)):
            continue
        values = {bool(f[ft.name]) for f in bad}
        if len(values) != 1:
            continue
        column = [bool(f[ft.name]) for f in features]
        if column == list(split) or column == [not s for s in split]:
            continue
        shared[ft.name] = values.pop()
    return [all(bool(f[k]) == v for k, v in shared.items()) for f in features]


def _contrast(split: Sequence[bool], failed: Sequence[bool], alike: Sequence[bool]) -> dict:
    """The counts of a claim over the comparable items."""
    pairs = [(s, b) for s, b, a in zip(split, failed, alike) if a]
    return dict(n_fail_with=sum(s and b for s, b in pairs), n_with=sum(s for s, _ in pairs),
                n_fail_without=sum(b and not s for s, b in pairs),
                n_without=sum(not s for s, _ in pairs))


def feature_effects(spec: DiagnosisSpec, features: Sequence[Mapping], failed: Sequence[bool],
                    magnitudes: Sequence[Optional[float]] = ()) -> list[FeatureEffect]:
    """How failing depends on each case feature over a set of items: only claims with
    their contrast. "Fails only with X": every failing item has X, and comparable items
    without X (`comparable`) exist; they pass, since no failing item lacks X. "Never
    fails with X": no failing item has X, and comparable items with X exist.

    `features[i]` are item i's feature values, `failed[i]` its verdict, `magnitudes[i]`
    the absolute error of its most often wrong output (None when that output passed)."""
    effects = []
    n_fail = sum(failed)
    if not n_fail:
        return effects
    for ft in spec.features:
        if ft.numeric:
            pts = [(f[ft.name], m) for f, bad, m in zip(features, failed, magnitudes)
                   if bad and m is not None and math.isfinite(m)]
            if len(pts) >= MIN_TREND_ITEMS and len({x for x, _ in pts}) >= MIN_TREND_VALUES:
                rho = _spearman([x for x, _ in pts], [y for _, y in pts])
                if rho >= MIN_TREND_RHO:
                    effects.append(FeatureEffect(ft.name, EffectKind.GROWS, ft.words,
                                                 rho=rho, n_trend=len(pts)))
            continue
        has = [bool(f[ft.name]) for f in features]
        n_fail_with = sum(h and b for h, b in zip(has, failed))
        if n_fail_with not in (0, n_fail):
            continue
        counts = _contrast(has, failed, comparable(spec, features, failed, has, ft.name))
        if n_fail_with == n_fail and counts["n_without"]:
            effects.append(FeatureEffect(ft.name, EffectKind.ONLY_WITH, ft.words, **counts))
        elif n_fail_with == 0 and counts["n_with"]:
            effects.append(FeatureEffect(ft.name, EffectKind.NEVER_WITH, ft.words, **counts))
    # the most telling first: "only with" backed by many comparable items without it
    order = [EffectKind.ONLY_WITH, EffectKind.GROWS, EffectKind.NEVER_WITH]
    effects.sort(key=lambda e: (order.index(e.kind), -(
        e.n_without if e.kind is EffectKind.ONLY_WITH else e.n_with)))
    return effects


def score_causes(spec: DiagnosisSpec, features: Sequence[Mapping], failed: Sequence[bool],
                 cands: Sequence[Sequence[str]]) -> list[CauseScore]:
    """Log-likelihood of the run under each cause, best first (see the module doc).

    Items whose rules named nothing weigh the same under every cause and are skipped."""
    scores = []
    if not any(failed):
        return scores
    for cs in spec.causes:
        v = cs.cause.value
        ll_items = sum(math.log(1 / len(c)) if v in c else math.log(MISSED)
                       for c, bad in zip(cands, failed) if bad and c)
        needs = [bool(cs.requires(f)) for f in features]
        n_need = sum(needs)
        fail_need = sum(n and bad for n, bad in zip(needs, failed))
        p = (fail_need + 1) / (n_need + 2)
        ll_feat = sum(math.log(p if bad else 1 - p) if n else
                      math.log(OUTSIDE if bad else 1 - OUTSIDE)
                      for n, bad in zip(needs, failed))
        scores.append(CauseScore(
            v, votes=sum(1 / len(c) for c, bad in zip(cands, failed) if bad and v in c),
            consistency=fail_need / sum(failed),
            coverage=fail_need / n_need if n_need else 0.0, score=ll_items + ll_feat,
            support=sum(1 for c, bad in zip(cands, failed) if bad and v in c)))
    scores.sort(key=lambda sc: -sc.score)
    return scores


def _default_spec_for(op_name: str) -> Optional[DiagnosisSpec]:
    ops = registry.ops()
    return ops[op_name].diagnosis if op_name in ops else None


def diagnose_run(rows: Iterable["ResultRow"],
                 spec_for: Callable[[str], Optional[DiagnosisSpec]] = _default_spec_for
                 ) -> list[RunDiagnosis]:
    """One RunDiagnosis per (op, implementation) of ops with a diagnosis hook.

    Rows are typed result rows (stored ones through `suite.results.read_rows`); rows of
    schema version 1 carry no localisation and weigh on features alone."""
    groups = defaultdict(list)
    for r in rows:
        if r.verdict is not None and r.verdict.compared:
            groups[(r.op, r.impl)].append(r)
    found = []
    for (op_name, impl), rs in sorted(groups.items()):
        spec = spec_for(op_name)
        if spec is None:
            continue
        found.append(_diagnose_group(spec, op_name, impl, rs))
    return found


def supported(scores: Sequence[CauseScore], n_fail: int) -> Optional[CauseScore]:
    """The best-scoring cause that failing items support: a candidate of at least one
    failing item and of at least SUPPORT of them. None: the run is unclassified (the best
    fit of the features alone is no diagnosis)."""
    need = max(1, math.ceil(SUPPORT * n_fail))
    return next((sc for sc in scores if sc.support >= need), None)


def _spot(e: Evidence, o: str) -> Optional[str]:
    """Where one item's errors of output o sit, as a short signature."""
    lo, pats = e.where(o), e.patterns(o)
    if pats and (lo is None or pats[0].coverage < lo.coverage):
        return f"{o} {pats[0].short()}"
    return f"{o} {lo.region}" if lo is not None else None


def remainder_effect(spec: DiagnosisSpec, rs: Sequence, evs: Sequence[Evidence],
                     failed: Sequence[bool]) -> Optional[str]:
    """Across items: the P whose remainder explains the failures along one axis, and how
    failing depends on it. The P must fit every failing item whose errors along that axis
    are a suffix (the remainder past a multiple of P), and, when the op gives its shapes,
    no item whose axis length is a multiple of P may fail there. Words, or None."""
    groups = defaultdict(list)  # (output, axis, noun) -> [(item index, pattern)]
    for i, (e, bad) in enumerate(zip(evs, failed)):
        if not bad:
            continue
        for p in e.patterns():
            if p.suffix_start is not None and (p.kind == "remainder" or p.last):
                groups[(p.output, p.axis, p.noun)].append((i, p))
    # a remainder of more than one element somewhere: else it is the last-index story
    groups = {k: v for k, v in groups.items() if any(p.kind == "remainder" for _, p in v)}
    if not groups:
        return None
    (out, axis, noun), hits = max(groups.items(), key=lambda kv: len(kv[1]))
    fits = None
    for _, p in hits:
        ps = set(remainder_periods(p.suffix_start, p.n))
        fits = ps if fits is None else fits & ps
    lengths = None
    if spec.shapes is not None:
        try:
            lengths = [spec.shapes(r.params).get(out) for r in rs]
            lengths = [sh[axis] if sh is not None and axis < len(sh) else None
                       for sh in lengths]
        except Exception:  # noqa: BLE001 - a shapes hook bug costs this sentence only
            lengths = None
    wrong_out = [out in e.wrong for e in evs]
    if lengths is not None and fits:
        # a failure in this output at a multiple of P contradicts P
        fits = {P for P in fits if not any(
            bad and w and n is not None and n % P == 0
            for bad, w, n in zip(failed, wrong_out, lengths))}
    if not fits:
        return None
    P = min(fits)
    many = plural(noun or "index") + ("" if noun else f" along dim {axis}")
    words = (f"{out} wrong past the last multiple of {P} {many} in {len(hits)} "
             f"item{'s' if len(hits) != 1 else ''}")
    if lengths is not None:
        # the claim needs comparable cases at a multiple of P, and they all pass
        known = [n is not None for n in lengths]
        split = [k and n % P != 0 for k, n in zip(known, lengths)]
        alike = [k and a for k, a in zip(known, comparable(
            spec, [e.features for e in evs], failed, split))]
        c = _contrast(split, failed, alike)
        if c["n_without"] and not c["n_fail_without"]:
            words += (f"; fails only when the number of {many} is not a multiple of {P} "
                      f"(fails {c['n_fail_with']} of {c['n_with']} comparable cases with a "
                      f"remainder, 0 of {c['n_without']} at a multiple)")
    pts = [(p.n - p.suffix_start, _max_abs(rs[i], out)) for i, p in hits]
    pts = [(x, y) for x, y in pts if y is not None and math.isfinite(y)]
    if len(pts) >= MIN_TREND_ITEMS and len({x for x, _ in pts}) >= 3:
        rho = _spearman([x for x, _ in pts], [y for _, y in pts])
        if rho >= MIN_TREND_RHO:
            words += (f"; error grows with the remainder (rank corr. {rho:.2f} over "
                      f"{len(pts)} items)")
    return words


def _max_abs(row, output: str) -> Optional[float]:
    m = next((o["max_abs"] for o in row.outputs or () if o["name"] == output), None)
    return float(m) if m is not None else None


def _diagnose_group(spec: DiagnosisSpec, op_name: str, impl: str, rs: list) -> RunDiagnosis:
    evs = [Evidence.from_row(r, spec) for r in rs]
    failed = [r.verdict is Verdict.FAIL for r in rs]
    feats = [e.features for e in evs]
    cands = [candidates(spec, e) if bad else () for e, bad in zip(evs, failed)]
    n_fail = sum(failed)
    if not n_fail:
        return RunDiagnosis(op_name, impl, len(rs), 0, None, "",
                            f"survived: passed all {len(rs)} items")
    main_out = Counter(o for e, bad in zip(evs, failed) if bad for o in e.wrong)
    main = main_out.most_common(1)[0][0] if main_out else None
    mags = []
    for r in rs:
        m = next((o["max_abs"] for o in r.outputs or () if o["name"] == main
                  and output_wrong(o)), None)
        mags.append(float(m) if m is not None else None)
    effects = feature_effects(spec, feats, failed, mags)
    scores = score_causes(spec, feats, failed, cands)
    best = supported(scores, n_fail)
    said = "; ".join(e.phrase() for e in effects[:3])
    head = f"{n_fail}/{len(rs)} items fail" + (f"; {said}" if said else "")
    where = Counter(spot for e, bad in zip(evs, failed) if bad
                    for spot in [_spot(e, o) for o in sorted(e.wrong)] if spot is not None)
    if where:
        spot, n = where.most_common(1)[0]
        head += f"; errors at {spot} in {n} items"
    rem = remainder_effect(spec, rs, evs, failed)
    if rem:
        head += f"; {rem}"
    if best is None:
        unsupported = ""
        if scores and any(cands):
            unsupported = (f" (best fit {scores[0].cause} is named by "
                           f"{scores[0].support} of {n_fail} failing items)")
        near = hypotheses.closest_over(spec.hypotheses,
                                       [e for e, bad in zip(evs, failed) if bad])
        if near:
            unsupported += "; closest hypotheses: " + ", ".join(
                f"{words} (median residual {res:.2g} over {k} items)"
                for words, res, k in near)
        return RunDiagnosis(op_name, impl, len(rs), n_fail, None, "unclassified",
                            f"unclassified: {head}{unsupported}", tuple(scores),
                            tuple(effects))
    cs = spec.cause_spec(best.cause)
    return RunDiagnosis(op_name, impl, len(rs), n_fail, best.cause, cs.title,
                        f"likely {cs.title}: {head}", tuple(scores), tuple(effects))
