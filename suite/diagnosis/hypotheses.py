"""Causes as checked hypotheses: stories of a wrong output that the golden can be made to
tell, each tested against the error and named only when it explains it.

Three kinds, each a reference tensor the error is fitted to (`fit_term`: least squares
coefficient and residual), stored like any term fit (TermFit, the `error_terms` column)
under a name that says its kind:

    term:NAME     error = c x a named term of the golden (the op's decomposition of an
                  output: softmax's y * g and y * rowsum(y * g)); c reads as the term
                  missing (-1), counted twice (+1), its sign flipped (-2) or scaled wrong
                  (any other c, on outputs of MIN_SCALED elements or more)
    attr:NAME     output = the golden computed with a perturbed attribute (another scale,
                  eps, step count...): error = +1 x (that golden - the golden)
    index:...     output = the golden at a shifted index (one step either way along an
                  axis, 0 past the edge) or transposed (the last two axes, when square),
                  or another output's golden of the same shape (outputs swapped)

The op declares its terms and perturbations (`Hypotheses`, `DiagnosisSpec.hypotheses`):
their names and words, statically, so that every story is a cause of the op's table,
and the functions that compute them from the case's float64 inputs (its golden module
holds the terms). The index stories need nothing from the op. A hypothesis explains an
output's error when its residual is at most EXACT_RESIDUAL and its coefficient reads as
one of the above; of those that do, the smallest residual names the cause (`named`), and
an item no hypothesis explains says which came closest (`closest`). The op's rule table
places the hypotheses' rules (`Hypotheses.rules`) after its own exact ones and before the
positions (`ordered`).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, Mapping, Optional, Sequence

import torch

from bwd_suite.suite import values
from bwd_suite.suite.diagnosis.evidence import (COEF_TOL, EXACT_RESIDUAL, HYPOTHESIS_KINDS,
                                                Evidence, Rule, is_hypothesis)
from bwd_suite.suite.diagnosis.generic import KIND_RULES, fallback
from bwd_suite.suite.diagnosis.vocabulary import CauseSpec, Term

TERM, ATTR, INDEX = HYPOTHESIS_KINDS
# a fitted scale names "scaled wrong" only on outputs this large: on a few elements (a
# scalar loss) any error is some multiple of any term
MIN_SCALED = 8
# hypotheses are built for outputs up to this many elements (each is an output-sized
# float64 tensor or a golden evaluation)
MAX_ELEMENTS = 1 << 24
# how the coefficient of a term reads, and the cause family of each reading
READINGS = ((-1.0, "missing", "missing"), (1.0, "twice", "counted twice"),
            (-2.0, "sign", "with its sign flipped"))
# near ties between explaining hypotheses (residuals this close) go to the fixed readings
# over a fitted scale
TIE = 0.02


class IndexCause(enum.Enum):
    """The index stories, the same for every op."""

    SHIFTED = "index_shifted"
    TRANSPOSED = "index_transposed"
    SWAPPED = "outputs_swapped"


INDEX_CAUSES = (
    CauseSpec(IndexCause.SHIFTED, "an index off by one (an output is the golden one step "
              "along an axis)", "the index arithmetic of the loads or the store along that "
              "axis: i against i - 1, a halo or a start offset"),
    CauseSpec(IndexCause.TRANSPOSED, "an output transposed",
              "the row and column strides of the store (or of the inputs it is built from)"),
    CauseSpec(IndexCause.SWAPPED, "outputs swapped (an output holds another's gradient)",
              "which pointer each result is stored through, the order of returned outputs"),
)


@dataclass(frozen=True)
class Hypotheses:
    """What an op declares for the checked hypotheses (`DiagnosisSpec.hypotheses`)."""

    op: str  # names the cause enum
    # term name -> its words ("y * rowsum(y * g)"), over every output
    terms: Mapping[str, str]
    # (params, float64 tensors, attrs) -> {output: {term name: value}} (a value may be a
    # list, for a list output)
    golden_terms: Callable[..., Mapping[str, Mapping[str, Any]]]
    # perturbation name -> words ("the weight decay not multiplied by lr")
    attributes: Mapping[str, str] = field(default_factory=dict)
    # (params, float64 tensors, attrs, golden) -> {name: {output: the golden under it}};
    # only perturbations that apply to the case
    perturbed: Optional[Callable[..., Mapping[str, Mapping[str, Any]]]] = None

    @cached_property
    def cause_enum(self) -> type:
        members = [(f"TERM_{r.upper()}_{t.upper()}", f"term_{r}:{t}")
                   for t in self.terms for _, r, _ in READINGS]
        members += [(f"TERM_SCALED_{t.upper()}", f"term_scaled:{t}") for t in self.terms]
        members += [(f"ATTR_{a.upper()}", f"attribute:{a}") for a in self.attributes]
        return enum.Enum(f"{self.op.title().replace('_', '')}Hypothesis", members)

    @cached_property
    def causes(self) -> tuple:
        """Every story as a CauseSpec: per term its readings, per perturbation one, and
        the index stories."""
        found = []
        for member in self.cause_enum:
            family, _, name = member.value.partition(":")
            if family == "attribute":
                found.append(CauseSpec(member, f"the result computed "
                                       f"{self.attributes[name]}",
                                       f"the attribute as the golden takes it: the result "
                                       f"matches the one computed {self.attributes[name]}"))
                continue
            words = self.terms[name]
            reading = next((w for _, r, w in READINGS if family == f"term_{r}"),
                           "scaled wrong")
            found.append(CauseSpec(member, f"the term {words} {reading}",
                                   f"where {words} enters the output: its presence, sign "
                                   f"and factor"))
        return tuple(found) + INDEX_CAUSES

    @cached_property
    def rules(self) -> tuple:
        """One rule per story: it holds when it is the story that explains some wrong
        output best (`named`)."""
        return tuple(Rule(c.cause, lambda e, v=c.cause.value: v in named(e))
                     for c in self.causes)


# ---------------------------------------------------------------- building the references

def _shifted(g: torch.Tensor, axis: int, step: int) -> torch.Tensor:
    """out[i] = g[i + step] along `axis`, 0 past the edge."""
    out = torch.zeros_like(g)
    n = g.shape[axis]
    if step > 0:
        out.narrow(axis, 0, n - step).copy_(g.narrow(axis, step, n - step))
    else:
        out.narrow(axis, -step, n + step).copy_(g.narrow(axis, 0, n + step))
    return out


def index_terms(output: str, golden: Mapping, nouns: Sequence) -> list:
    """The index stories of one (tensor) output, as Terms of (that golden - the golden)."""
    g = golden[output]
    found = []
    for a, n in enumerate(g.shape):
        if n < 2:
            continue
        noun = nouns[a] if a < len(nouns) and nouns[a] else f"index along dim {a}"
        for step in (1, -1):
            found.append(Term(f"{INDEX}:shift:{a}:{step:+d}",
                              f"{output} = the golden one {noun} {'ahead' if step > 0 else 'behind'} "
                              f"({noun} i {'+' if step > 0 else '-'} 1)",
                              _shifted(g, a, step) - g))
    if g.dim() >= 2 and g.shape[-1] == g.shape[-2] > 1:
        found.append(Term(f"{INDEX}:transposed", f"{output} = the golden transposed",
                          g.transpose(-1, -2) - g))
    for other, v in golden.items():
        if other != output and not values.is_list(v) and tuple(v.shape) == tuple(g.shape):
            found.append(Term(f"{INDEX}:output:{other}", f"{output} = the golden {other}",
                              v - g))
    return found


def build(hyp: Hypotheses, params: Mapping, tensors: Mapping, attrs: Mapping,
          golden: Mapping, outputs: Sequence[str], nouns: Callable[[str, int], tuple],
          cache: Optional[dict] = None) -> dict:
    """{output: [Term]} of every story of each of `outputs` (the wrong, finite ones).
    `cache` (one per case: the stories depend on its inputs only) keeps the golden terms
    and perturbations for the next implementation failing the same case."""
    cache = cache if cache is not None else {}
    outputs = [o for o in outputs if o in golden
               and values.flat(golden[o]).numel() <= MAX_ELEMENTS]
    if not outputs:
        return {}
    if "terms" not in cache:
        cache["terms"] = hyp.golden_terms(params, tensors, attrs)
    if "perturbed" not in cache:
        cache["perturbed"] = hyp.perturbed(params, tensors, attrs, golden) \
            if hyp.perturbed is not None else {}
    found = {o: [] for o in outputs}
    for o in outputs:
        for name, value in cache["terms"].get(o, {}).items():
            if not values.is_list(value):  # a term constant along an axis, made whole
                value = torch.broadcast_to(value, golden[o].shape)
            found[o].append(Term(f"{TERM}:{name}", f"the term {hyp.terms[name]}", value))
        for name, g in cache["perturbed"].items():
            if o in g:
                diff = [x - y for x, y in zip(g[o], golden[o])] if values.is_list(g[o]) \
                    else g[o] - golden[o]
                found[o].append(Term(f"{ATTR}:{name}", f"{o} computed "
                                     f"{hyp.attributes[name]}", diff))
        if not values.is_list(golden[o]):
            key = ("index", o)
            if key not in cache:
                cache[key] = index_terms(o, golden, nouns(o, golden[o].dim()))
            found[o] += cache[key]
    return found


# ---------------------------------------------------------------- checking them

@dataclass(frozen=True)
class Check:
    """One story of one wrong output, tested: the fitted coefficient and the residual."""

    output: str
    term: str  # the stored name: term:NAME, attr:NAME, index:...
    coef: float
    residual: float
    numel: int = 0  # elements of the output (a fitted scale needs MIN_SCALED)

    @property
    def kind(self) -> str:
        return self.term.partition(":")[0]

    @property
    def reading(self) -> Optional[str]:
        """How the coefficient reads: a term's missing / twice / sign / scaled, a
        perturbation's or index story's match (+1); None: it does not fit."""
        c = self.coef
        if self.kind == TERM:
            for want, name, _ in READINGS:
                if abs(c - want) <= COEF_TOL:
                    return name
            return "scaled" if abs(c) > COEF_TOL and self.numel >= MIN_SCALED else None
        return "match" if abs(c - 1) <= COEF_TOL else None

    @property
    def explains(self) -> bool:
        return self.reading is not None and self.residual <= EXACT_RESIDUAL

    @property
    def cause(self) -> Optional[str]:
        """The cause value this story names when it explains the error."""
        kind, _, rest = self.term.partition(":")
        if kind == TERM:
            return f"term_{self.reading}:{rest}"
        if kind == ATTR:
            return f"attribute:{rest}"
        if rest.startswith("shift"):
            return IndexCause.SHIFTED.value
        if rest == "transposed":
            return IndexCause.TRANSPOSED.value
        return IndexCause.SWAPPED.value


def checks(e: Evidence) -> list:
    """Every story of the wrong outputs, the best residual first."""
    found = [Check(t.output, t.term, t.coef, t.residual,
                   e.wrong_counts.get(t.output, (0, 0))[1])
             for t in e.fits if is_hypothesis(t.term) and t.output in e.wrong]
    return sorted(found, key=lambda c: c.residual)


def _rank(c: Check) -> tuple:
    """Among near ties: a fixed reading before a fitted scale."""
    return (c.reading == "scaled",)


def explaining(e: Evidence) -> dict:
    """{output: the story that explains its error best}, for the wrong outputs that have
    one: of the stories that explain it, one that explains the most wrong outputs (one
    bug, one story: beta1 and beta2 swapped explains the weights and both moments, a
    term of exp_avg that happens to fit only that one), then the smallest residual.
    Memoised on the evidence (every story's rule asks)."""
    key = "hypotheses"
    if key not in e.memo:
        fits = [c for c in checks(e) if c.explains]
        reach = {}
        for c in fits:
            reach.setdefault(c.cause, set()).add(c.output)
        best = {}
        for c in fits:  # the best residual first
            top = best.get(c.output)
            if top is None:
                best[c.output] = c
                continue
            wider = len(reach[c.cause]) - len(reach[top.cause])
            if wider > 0 or (wider == 0 and c.residual <= top.residual + TIE
                             and _rank(c) < _rank(top)):
                best[c.output] = c
        e.memo[key] = best
    return e.memo[key]


def named(e: Evidence) -> set:
    """The cause values the explaining stories name."""
    return {c.cause for c in explaining(e).values()}


def closest(e: Evidence, n: int = 3) -> list:
    """The stories that came closest, whether or not they explain: one per (output,
    cause family) at most, the best residual first."""
    seen, found = set(), []
    for c in checks(e):
        if not math.isfinite(c.residual):
            continue
        key = (c.output, c.term)
        if key not in seen:
            seen.add(key)
            found.append(c)
        if len(found) == n:
            break
    return found


def describe(hyp: Optional[Hypotheses], c: Check) -> str:
    """A story's words from the op's declarations alone (a stored row keeps no words)."""
    kind, _, rest = c.term.partition(":")
    if kind == TERM and hyp is not None and rest in hyp.terms:
        return f"{c.output} error = {c.coef:+.2f} x the term {hyp.terms[rest]}"
    if kind == ATTR and hyp is not None and rest in hyp.attributes:
        return f"{c.output} computed {hyp.attributes[rest]} (coefficient {c.coef:+.2f})"
    if rest.startswith("shift:"):
        _, axis, step = rest.split(":")
        return f"{c.output} = the golden one index {'ahead' if int(step) > 0 else 'behind'} " \
               f"along dim {axis} (coefficient {c.coef:+.2f})"
    if rest.startswith("output:"):
        return f"{c.output} = the golden {rest.partition(':')[2]} (coefficient {c.coef:+.2f})"
    return f"{c.output} ~ {c.coef:+.2f} x {c.term}"


def closest_over(hyp: Optional[Hypotheses], evidences: Sequence[Evidence],
                 n: int = 2) -> list:
    """Across failing items: the stories with the smallest median residual (over the
    items that fitted them), as (words with the median coefficient, median residual,
    items)."""
    per = {}
    for e in evidences:
        for c in checks(e):
            if math.isfinite(c.residual) and math.isfinite(c.coef):
                per.setdefault((c.output, c.term), []).append(c)
    found = []
    for cs in per.values():
        cs = sorted(cs, key=lambda c: c.residual)
        mid = cs[len(cs) // 2]
        found.append((describe(hyp, mid), mid.residual, len(cs)))
    return sorted(found, key=lambda f: f[1])[:n]


def ordered(exact: Sequence[Rule], hypotheses: Sequence[Rule],
            positional: Sequence[Rule] = ()) -> tuple:
    """A rule table: the failure kind's rules (an input modified) and the op's exact
    rules; the hypotheses' rules where none of those holds; then the positional ones (the
    op's and the period search's) where neither does."""
    exact = KIND_RULES + tuple(exact)
    first = exact + fallback(exact, tuple(hypotheses))
    return first + fallback(first, tuple(positional)) if positional else first
