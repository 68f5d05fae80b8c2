"""Failure diagnosis: where the wrong elements of a failing output sit, how the failures
of an implementation depend on case features across a run, and a one-line likely cause.

Generic machinery only. An op says what its axes and features mean through
`OpSpec.diagnosis`, a `DiagnosisSpec`: named regions of each output (tile ends, packed
boundaries, padding, one batch index, ...), reference terms its error can be compared with
(e.g. the contribution of the gradients right of each tile), the case features that
matter, its causes and a rule table from evidence to causes. This module measures and
scores; it knows no op.

Per failing item (called by the runner, which holds the golden and the outputs):

    wrong outputs     those beyond tolerance (or unwritten, or not finite)
    error_locations   per wrong output and region: the share of its wrong elements inside
                      the region, the share of the region that is wrong, the region's size
    error_terms       per wrong output and term: error ~ coef * term, and the residual left
    -> Evidence -> the op's rules -> candidate causes -> a one-line diagnosis

Across a run (`diagnose_run`, for the mutants command and the report): per implementation,
each cause gets the log-likelihood of what was seen under "this is the bug" (naive Bayes):

    items: a failing item naming n candidates, c among them   log(1/n)
           a failing item whose candidates leave c out        log(MISSED)
    features: items with the features c needs fail at a rate p (estimated, Laplace),
           the others at OUTSIDE                               log p or log(1-p), ...

so a cause needing SiLU and bias beats one needing SiLU alone when SiLU without bias
passes, and a single failing item without the needed features costs log(OUTSIDE).
"""

from __future__ import annotations

import enum
import math
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Optional, Sequence

import torch

from suite.outcomes import Verdict

if TYPE_CHECKING:
    from suite.rows import ResultRow

# A region holds the errors when it contains at least this share of the wrong elements;
# not 1.0, so that a few elements just beyond tolerance elsewhere do not hide a pattern.
CONCENTRATED = 0.9
# A region says something only if it is at most this share of the output.
SPECIFIC = 0.5
# Errors are "spread" only if no region leaving out a fifth of the output holds them.
LOCALISED = 0.8
# error = coef * term "exactly": coef within this of the expected value, and the residual
# (|error - coef*term| / |error|) at most EXACT_RESIDUAL; rounding noise of a 16-bit store
# is a few per cent of a planted error, never tens.
COEF_TOL = 0.1
EXACT_RESIDUAL = 0.15
# The term explains part of the error (a scaled or partial version of it).
PARTIAL_RESIDUAL = 0.9
# Cross-case likelihood: the chance that the rules miss the true cause of a failing item,
# and that an item without the features a cause needs fails because of it anyway.
MISSED = 0.05
OUTSIDE = 0.01


# ---------------------------------------------------------------- what the op provides

@dataclass(frozen=True)
class Region:
    """A named set of elements of one output; `mask` broadcasts to the output's shape."""

    name: str  # family, then a qualifier: "tile_tail_64", "batch_1"
    doc: str  # words for the diagnosis: "the last 3 steps of each 64-step tile"
    mask: torch.Tensor


@dataclass(frozen=True)
class Term:
    """A reference tensor (same shape as the output) the error is compared with."""

    name: str  # family, then a qualifier: "tile_halo_64", "state_path"
    doc: str  # "the contribution of the K-1 gradients right of each 64-step tile"
    value: torch.Tensor


@dataclass(frozen=True)
class CauseSpec:
    cause: enum.Enum  # a member of the op's cause enum; its value is what rows store
    title: str  # the likely cause, in a few words
    check: str  # what to look at in the kernel
    # case features without which the bug cannot show (for the cross-case weighing)
    requires: Callable[[Mapping], bool] = field(default=lambda f: True)


@dataclass(frozen=True)
class Feature:
    name: str
    words: str  # "with SiLU": reads after "fails only" / "never fails"
    numeric: bool = False  # compared by rank correlation ("grows with"), not by presence


@dataclass(frozen=True)
class Rule:
    """Evidence -> cause. All rules that hold name candidates, in table order."""

    cause: enum.Enum
    when: Callable[["Evidence"], bool]


@dataclass(frozen=True)
class DiagnosisSpec:
    """What an op tells the diagnosis (the `OpSpec.diagnosis` hook)."""

    causes: tuple  # of CauseSpec
    rules: tuple  # of Rule
    features: tuple  # of Feature
    # params -> {feature name: value} for every Feature
    case_features: Callable[[Mapping], Mapping[str, Any]]
    # (params, float64 input tensors, output name, output shape) -> regions of that output
    regions: Callable[..., Sequence[Region]]
    # (params, float64 input tensors, attrs, Evidence so far: wrong outputs and locations,
    # no fits) -> {output: [Term]}; only terms the locations make worth testing
    terms: Callable[..., Mapping[str, Sequence[Term]]]

    def __post_init__(self):
        known = {c.cause for c in self.causes}
        for r in self.rules:
            if r.cause not in known:
                raise ValueError(f"rule for {r.cause} names no CauseSpec")

    def cause_spec(self, value: str) -> Optional[CauseSpec]:
        return next((c for c in self.causes if c.cause.value == value), None)


# ---------------------------------------------------------------- measurements

@dataclass(frozen=True)
class Location:
    """Where one output's wrong elements sit relative to one region (a result struct)."""

    output: str
    region: str
    n_bad: int  # wrong elements inside the region
    n_region: int  # elements of the region
    share: float  # n_bad / wrong elements of the output: 1.0 = all errors are here
    density: float  # n_bad / n_region: 1.0 = every element of the region is wrong
    coverage: float  # n_region / elements of the output: how specific the region is


@dataclass(frozen=True)
class TermFit:
    """error ~ coef * term, least squares over the whole output (a result struct)."""

    output: str
    term: str
    coef: float
    residual: float  # |error - coef*term| / |error|: 0 = the term explains all of it


def bad_mask(actual: torch.Tensor, golden: torch.Tensor, allowed: float,
             scale: float) -> torch.Tensor:
    """Elements beyond tolerance, counting NaN and inf (and the poison) as wrong."""
    diff = (actual.to(golden.device, torch.float64) - golden).abs()
    return ~(diff <= allowed * scale)


def locate(output: str, bad: torch.Tensor, regions: Iterable[Region]) -> list[Location]:
    """One Location per region holding at least one wrong element."""
    n_total, numel = int(bad.sum()), bad.numel()
    found = []
    if not n_total:
        return found
    for r in regions:
        m = torch.broadcast_to(r.mask.to(bad.device, torch.bool), bad.shape)
        n_region = int(m.sum())
        n_in = int((bad & m).sum()) if n_region else 0
        if n_in:
            found.append(Location(output, r.name, n_in, n_region, n_in / n_total,
                                  n_in / n_region, n_region / numel))
    return found


def fit_term(output: str, error: torch.Tensor, term: Term) -> Optional[TermFit]:
    t = term.value.to(error.device, torch.float64)
    tt, ee = float((t * t).sum()), float((error * error).sum())
    if tt == 0 or ee == 0 or not math.isfinite(ee):
        return None
    coef = float((error * t).sum()) / tt
    residual = float((error - coef * t).norm()) / math.sqrt(ee)
    return TermFit(output, term.name, coef, residual)


def _in_family(name: str, family: str) -> bool:
    return name == family or name.startswith(family + "_")


# ---------------------------------------------------------------- evidence and rules

@dataclass(frozen=True)
class Evidence:
    """What the rules see about one failing item; rebuilt from a stored row as well."""

    wrong: frozenset  # output names beyond tolerance
    locations: tuple  # of Location
    fits: tuple  # of TermFit
    features: Mapping[str, Any]
    wrong_counts: Mapping[str, tuple] = field(default_factory=dict)  # output -> (n_bad, numel)

    def f(self, name: str) -> Any:
        return self.features[name]

    def only(self, *outputs: str) -> bool:
        """Something is wrong, and only among `outputs`."""
        return bool(self.wrong) and self.wrong <= set(outputs)

    def where(self, output: str) -> Optional[Location]:
        """The most specific region holding the output's errors, or None (spread)."""
        held = [lo for lo in self.locations if lo.output == output
                and lo.share >= CONCENTRATED and lo.coverage <= SPECIFIC]
        return min(held, key=lambda lo: lo.coverage) if held else None

    def located(self, output: str, family: str) -> bool:
        """The output is wrong and its most specific region is of this family."""
        lo = self.where(output) if output in self.wrong else None
        return lo is not None and _in_family(lo.region, family)

    def at(self, output: str, family: str, specific: bool = False) -> Optional[Location]:
        """A region of this family holds the output's errors (if `specific`, one of at
        most SPECIFIC of the output), even when a smaller region of another family does."""
        held = [lo for lo in self.locations if lo.output == output
                and _in_family(lo.region, family) and lo.share >= CONCENTRATED
                and (not specific or lo.coverage <= SPECIFIC)]
        return min(held, key=lambda lo: lo.coverage) if held else None

    def touches(self, output: str, family: str) -> bool:
        """Some wrong element of the output lies in a region of this family."""
        return any(lo.output == output and _in_family(lo.region, family) and lo.n_bad
                   for lo in self.locations)

    def fit(self, output: str, family: str) -> list[TermFit]:
        return [t for t in self.fits if t.output == output and _in_family(t.term, family)]

    def explains(self, output: str, family: str, coef: float) -> bool:
        """error = coef * term of this family, within rounding."""
        return any(abs(t.coef - coef) <= COEF_TOL and t.residual <= EXACT_RESIDUAL
                   for t in self.fit(output, family))

    def partly(self, output: str, family: str) -> bool:
        """A term of this family explains some of the error, but not as exactly -1 x."""
        return any(t.residual <= PARTIAL_RESIDUAL for t in self.fit(output, family)) \
            and not self.explains(output, family, -1.0)

    def loses(self, output: str, family: str) -> bool:
        """The error looks like (some of) this term missing: a negative coefficient."""
        return any(t.coef < -COEF_TOL and t.residual <= PARTIAL_RESIDUAL
                   for t in self.fit(output, family))

    def spread(self, output: str) -> bool:
        """Wrong with no region (of at most LOCALISED of it) holding the errors and no
        term that explains much of it."""
        return (output in self.wrong
                and not any(lo.output == output and lo.share >= CONCENTRATED
                            and lo.coverage <= LOCALISED for lo in self.locations)
                and not any(t.residual <= PARTIAL_RESIDUAL for t in self.fits
                            if t.output == output))

    @classmethod
    def from_row(cls, row: "ResultRow", spec: DiagnosisSpec) -> "Evidence":
        wrong, counts = set(), {}
        for o in row.outputs or ():
            if _output_wrong(o):
                wrong.add(o["name"])
                counts[o["name"]] = (int(o["n_bad"]), int(o["numel"]))
        locs = tuple(Location(**lo) for lo in row.error_locations or ())
        fits = tuple(TermFit(**t) for t in row.error_terms or ())
        return cls(frozenset(wrong), locs, fits, spec.case_features(row.params), counts)


def _output_wrong(o: Mapping) -> bool:
    return bool(o["n_unwritten"] or o["n_nonfinite"] or o["err"] > o["allowed"])


def candidates(spec: DiagnosisSpec, ev: Evidence) -> tuple:
    """Cause values whose rules hold, in table order, each once."""
    seen = []
    for r in spec.rules:
        if r.cause.value not in seen and r.when(ev):
            seen.append(r.cause.value)
    return tuple(seen)


# ---------------------------------------------------------------- one failing item

@dataclass(frozen=True)
class ItemDiagnosis:
    causes: tuple  # candidate cause values, best first (empty: unclassified)
    text: str
    locations: tuple
    fits: tuple

    @property
    def cause(self) -> Optional[str]:
        """The best candidate cause's value, None when unclassified."""
        return self.causes[0] if self.causes else None

    @property
    def location_records(self) -> list[dict]:
        """The locations as the results' error_locations column stores them."""
        return [asdict(lo) for lo in self.locations]

    @property
    def term_records(self) -> list[dict]:
        """The term fits as the results' error_terms column stores them."""
        return [asdict(t) for t in self.fits]


def diagnose_item(spec: DiagnosisSpec, params: Mapping, tensors: Mapping, attrs: Mapping,
                  golden: Mapping, actual: Mapping, checks: Sequence) -> ItemDiagnosis:
    """Localise the wrong elements of every failing output and name candidate causes.

    `tensors` are the case inputs in float64 on the golden's device; `checks` are the
    verdicts' OutputCheck records (name, allowed, scale, failure)."""
    wrong = frozenset(c.name for c in checks if c.failure is not None)
    locations, fits, counts, docs = [], [], {}, {}
    errors = {}
    for c in checks:
        if c.name not in wrong:
            continue
        g = golden[c.name]
        a = actual[c.name].to(g.device, torch.float64)
        bad = bad_mask(a, g, c.allowed, c.scale)
        counts[c.name] = (int(bad.sum()), bad.numel())
        regions = spec.regions(params, tensors, c.name, tuple(g.shape))
        docs.update({(c.name, r.name): r.doc for r in regions})
        locations += locate(c.name, bad, regions)
        err = a - g
        if bool(torch.isfinite(err).all()):
            errors[c.name] = err
    features = spec.case_features(params)
    # terms only for outputs whose error is finite (a fit of inf or NaN says nothing)
    located = Evidence(frozenset(errors), tuple(locations), (), features, counts)
    for out_name, terms in spec.terms(params, tensors, attrs, located).items():
        for t in terms:
            docs[(out_name, t.name)] = t.doc
            tf = fit_term(out_name, errors[out_name], t) if out_name in errors else None
            if tf is not None:
                fits.append(tf)
    ev = Evidence(wrong, tuple(locations), tuple(fits), features, counts)
    causes = candidates(spec, ev)
    return ItemDiagnosis(causes, item_text(spec, ev, causes, docs), ev.locations, ev.fits)


def item_text(spec: DiagnosisSpec, ev: Evidence, causes: Sequence[str],
              docs: Mapping = None) -> str:
    """One line: the likely cause (or 'unclassified'), where, and the best term fit."""
    docs = docs or {}
    parts = []
    for o in sorted(ev.wrong):
        lo = ev.where(o)
        n_bad, numel = ev.wrong_counts.get(o, (None, None))
        if lo is not None:
            words = docs.get((o, lo.region), f"in region {lo.region}")
            total = n_bad if n_bad is not None else lo.n_bad
            parts.append(f"{o} wrong {words} ({lo.share:.0%} of {total} wrong elements)")
        elif n_bad is not None:
            parts.append(f"{o} wrong at {n_bad / max(numel, 1):.0%} of its elements, "
                         f"no specific region")
        else:
            parts.append(f"{o} wrong")
        best = min((t for t in ev.fits if t.output == o), key=lambda t: t.residual,
                   default=None)
        if best is not None and best.residual <= EXACT_RESIDUAL:
            parts[-1] += (f", error = {best.coef:+.2f} x "
                          f"{docs.get((o, best.term), best.term)}")
    where = "; ".join(parts) or "no output beyond tolerance"
    if not causes:
        return f"unclassified: {where}"
    titles = [spec.cause_spec(c).title for c in causes]
    also = f" (or: {', '.join(titles[1:3])})" if len(titles) > 1 else ""
    return f"likely {titles[0]}{also}: {where}"


# ---------------------------------------------------------------- across a run

class EffectKind(enum.Enum):
    ONLY_WITH = "only_with"  # every failing item has the feature, some passing ones lack it
    NEVER_WITH = "never_with"  # no failing item has it, some passing ones do
    GROWS = "grows"  # the error grows with a numeric feature over the failing items


@dataclass(frozen=True)
class FeatureEffect:
    feature: str
    kind: EffectKind
    words: str
    n_fail_with: int = 0
    n_with: int = 0
    n_fail_without: int = 0
    n_without: int = 0
    rho: Optional[float] = None  # rank correlation, for "grows"

    def phrase(self) -> str:
        if self.kind is EffectKind.GROWS:
            return f"error grows with {self.words} (rank corr. {self.rho:.2f})"
        pre = "fails only" if self.kind is EffectKind.ONLY_WITH else "never fails"
        return f"{pre} {self.words}"


@dataclass(frozen=True)
class CauseScore:
    cause: str
    votes: float  # sum over failing items of 1/(number of candidates) where named
    consistency: float  # failing items having the features the cause needs / failing items
    coverage: float  # failing items with those features / all items with them
    score: float  # log-likelihood of the run's items under this cause (higher is better)


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


def feature_effects(spec: DiagnosisSpec, features: Sequence[Mapping], failed: Sequence[bool],
                    magnitudes: Sequence[Optional[float]] = ()) -> list[FeatureEffect]:
    """How failing depends on each case feature over a set of items.

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
                                                 rho=rho))
            continue
        has = [bool(f[ft.name]) for f in features]
        n_with = sum(has)
        n_fail_with = sum(h and b for h, b in zip(has, failed))
        counts = dict(n_fail_with=n_fail_with, n_with=n_with,
                      n_fail_without=n_fail - n_fail_with, n_without=len(has) - n_with)
        if n_fail_with == n_fail and counts["n_without"]:
            effects.append(FeatureEffect(ft.name, EffectKind.ONLY_WITH, ft.words, **counts))
        elif n_fail_with == 0 and n_with:
            effects.append(FeatureEffect(ft.name, EffectKind.NEVER_WITH, ft.words, **counts))
    # the most telling first: "only with" backed by many items without the feature
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
            coverage=fail_need / n_need if n_need else 0.0, score=ll_items + ll_feat))
    scores.sort(key=lambda sc: -sc.score)
    return scores


def _default_spec_for(op_name: str) -> Optional[DiagnosisSpec]:
    from suite import registry

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
                  and _output_wrong(o)), None)
        mags.append(float(m) if m is not None else None)
    effects = feature_effects(spec, feats, failed, mags)
    scores = score_causes(spec, feats, failed, cands)
    named = any(cands)
    best = scores[0] if scores and named else None
    said = "; ".join(e.phrase() for e in effects[:3])
    head = f"{n_fail}/{len(rs)} items fail" + (f"; {said}" if said else "")
    where = Counter(f"{lo.output} {lo.region}" for e, bad in zip(evs, failed) if bad
                    for lo in [e.where(o) for o in sorted(e.wrong)] if lo is not None)
    if where:
        spot, n = where.most_common(1)[0]
        head += f"; errors at {spot} in {n} items"
    if best is None:
        return RunDiagnosis(op_name, impl, len(rs), n_fail, None, "unclassified",
                            f"unclassified: {head}", tuple(scores), tuple(effects))
    cs = spec.cause_spec(best.cause)
    return RunDiagnosis(op_name, impl, len(rs), n_fail, best.cause, cs.title,
                        f"likely {cs.title}: {head}", tuple(scores), tuple(effects))
