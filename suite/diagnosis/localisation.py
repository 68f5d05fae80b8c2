"""Per failing item (called by the runner, which holds the golden and the outputs): where
the wrong elements of each failing output sit, which reference terms explain the error,
the candidate causes the op's rules name, and a one-line diagnosis."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Mapping, Optional, Sequence

import torch

from bwd_suite.suite import values
from bwd_suite.suite.diagnosis import hypotheses
from bwd_suite.suite.diagnosis.evidence import COEF_TOL, EXACT_RESIDUAL, Evidence, candidates
from bwd_suite.suite.diagnosis.measurements import bad_mask, fit_term, locate
from bwd_suite.suite.diagnosis.period_search import axis_patterns
from bwd_suite.suite.diagnosis.vocabulary import DiagnosisSpec, Term


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
                  golden: Mapping, actual: Mapping, checks: Sequence,
                  cache: Optional[dict] = None, kind: Optional[str] = None) -> ItemDiagnosis:
    """Localise the wrong elements of every failing output and name candidate causes.

    `tensors` are the case inputs in float64 on the golden's device; `checks` are the
    verdicts' OutputCheck records (name, allowed, scale, failure). A list output (a
    parameter list) is measured as the verdicts compare it, its tensors concatenated;
    its regions and terms are over that 1-D whole (a term may be a list as well), and the
    period search runs along the list index. The op's checked hypotheses
    (`spec.hypotheses`) are fitted like its terms; `cache`, one dict per case, keeps what
    they computed for the next implementation failing the same case. `kind`: the item's
    failure kind (its value), which some causes read (an input modified)."""
    wrong = frozenset(c.name for c in checks if c.failure is not None)
    locations, fits, counts, docs = [], [], {}, {}
    errors = {}
    for c in checks:
        if c.name not in wrong:
            continue
        g, a = golden[c.name], actual[c.name]
        sizes = [x.numel() for x in g] if values.is_list(g) else None
        g = values.flat(g)
        a = values.flat(a).to(g.device, torch.float64)
        bad = bad_mask(a, g, c.allowed, c.scale)
        counts[c.name] = (int(bad.sum()), bad.numel())
        regions = spec.regions(params, tensors, c.name, tuple(g.shape))
        docs.update({(c.name, r.name): r.doc for r in regions})
        locations += locate(c.name, bad, regions)
        along = bad
        nouns = spec.axis_nouns(params, c.name, 1 if sizes is not None else bad.dim())
        if sizes is not None:
            # a list output: its axis is the list index, a tensor wrong when any of its
            # elements is
            along = torch.stack([part.any() for part in bad.split(sizes)]) if sizes \
                else bad.new_zeros(0)
            nouns = (nouns[0] or "tensor",)
        locations += [p.location() for p in
                      axis_patterns(c.name, along, nouns, spec.periods)]
        err = a - g
        if bool(torch.isfinite(err).all()):
            errors[c.name] = err
    features = spec.case_features(params)
    # terms only for outputs whose error is finite (a fit of inf or NaN says nothing)
    err = {c.name: c.err for c in checks if c.name in wrong}
    located = Evidence(frozenset(errors), tuple(locations), (), features, counts, kind=kind,
                       errors=err)
    found = {o: list(ts) for o, ts in spec.terms(params, tensors, attrs, located).items()}
    if spec.hypotheses is not None and errors:
        stories = hypotheses.build(
            spec.hypotheses, params, tensors, attrs, golden, sorted(errors),
            lambda o, ndim: spec.axis_nouns(params, o, ndim), cache)
        for o, ts in stories.items():
            found.setdefault(o, []).extend(ts)
    for out_name, terms in found.items():
        for t in terms:
            docs[(out_name, t.name)] = t.doc
            if values.is_list(t.value):  # a list output's term: one per tensor
                t = Term(t.name, t.doc, values.flat(t.value))
            tf = fit_term(out_name, errors[out_name], t) if out_name in errors else None
            if tf is not None:
                fits.append(tf)
    ev = Evidence(wrong, tuple(locations), tuple(fits), features, counts,
                  frozenset(wrong - set(errors)), kind, err)
    causes = candidates(spec, ev)
    return ItemDiagnosis(causes, item_text(spec, ev, causes, docs), ev.locations, ev.fits)


def item_text(spec: DiagnosisSpec, ev: Evidence, causes: Sequence[str],
              docs: Mapping = None) -> str:
    """One line: the likely cause (or 'unclassified'), where, and the best term fit."""
    docs = docs or {}
    parts = []
    for o in sorted(ev.wrong):
        lo = ev.where(o)
        pats = ev.patterns(o)
        n_bad, numel = ev.wrong_counts.get(o, (None, None))
        if pats and (lo is None or pats[0].coverage < lo.coverage):
            # the period search is more specific than any region of the op: one pattern
            # per axis (at most two), the most telling first
            words = " and ".join(p.words() for p in pats[:2])
            total = n_bad if n_bad is not None else pats[0].n_bad
            parts.append(f"{o} wrong {words} ({pats[0].share:.0%} of {total} wrong "
                         f"elements)")
        elif lo is not None:
            words = docs.get((o, lo.region), f"in region {lo.region}")
            total = n_bad if n_bad is not None else lo.n_bad
            parts.append(f"{o} wrong {words} ({lo.share:.0%} of {total} wrong elements)")
        elif n_bad is not None:
            parts.append(f"{o} wrong at {n_bad / max(numel, 1):.0%} of its elements, "
                         f"no specific region")
        else:
            parts.append(f"{o} wrong")
        # the story that explains it (a checked hypothesis), else among the op's exact
        # fits the one whose coefficient is nearest +-1: collinear terms (the gradient
        # times two constants) fit alike, and +-1 is a hypothesis held
        story = hypotheses.explaining(ev).get(o)
        exact = [t for t in ev.fits if t.output == o and t.residual <= EXACT_RESIDUAL
                 and not hypotheses.is_hypothesis(t.term)]
        best = min(exact, key=lambda t: abs(abs(t.coef) - 1), default=None)
        if best is not None and (story is None or abs(abs(best.coef) - 1) <= COEF_TOL):
            parts[-1] += (f", error = {best.coef:+.2f} x "
                          f"{docs.get((o, best.term), best.term)} (residual "
                          f"{best.residual:.2g})")
        elif story is not None:
            parts[-1] += f", {_story_words(story, docs)}"
    where = "; ".join(parts) or "no output beyond tolerance"
    if not causes:
        near = hypotheses.closest(ev)
        tail = "; closest hypotheses: " + ", ".join(_story_words(c, docs) for c in near) \
            if near else ""
        return f"unclassified: {where}{tail}"
    titles = [spec.cause_spec(c).title for c in causes]
    also = f" (or: {', '.join(titles[1:3])})" if len(titles) > 1 else ""
    return f"likely {titles[0]}{also}: {where}"



def _story_words(c: "hypotheses.Check", docs: Mapping) -> str:
    """"error = -1.00 x the term y * rowsum(y * g) (residual 0.003)", or for a perturbed or
    moved golden "dx = the golden one column ahead (column i + 1): coefficient +1.00,
    residual 0.02"."""
    words = docs.get((c.output, c.term), c.term)
    if c.kind == hypotheses.TERM:
        return f"error = {c.coef:+.2f} x {words} (residual {c.residual:.2g})"
    return f"{words}: coefficient {c.coef:+.2f}, residual {c.residual:.2g}"
