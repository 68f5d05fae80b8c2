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
                      the region, the share of the region that is wrong, the region's size;
                      the op's regions, and the period search's pattern along each axis
                      (one index, a prefix, every tile but the first, the remainder past
                      the last multiple of P, residues of any period P)
    error_terms       per wrong output and term: error ~ coef * term, and the residual left
    -> Evidence -> the op's rules -> candidate causes -> a one-line diagnosis

Across a run (`diagnose_run`, for the mutants command and the report): per implementation,
each cause gets the log-likelihood of what was seen under "this is the bug" (naive Bayes):

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
from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Optional, Sequence

import torch

from bwd_suite.suite.outcomes import Verdict

if TYPE_CHECKING:
    from bwd_suite.suite.rows import ResultRow

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
# An axis pattern holds when it has CONCENTRATED of the wrong elements and the elements
# outside it are wrong at most CONTRAST times as often as those inside (a clean rest).
CONTRAST = 0.1
# The run-level cause must be a candidate of at least this share of the failing items
# (and of one at least); otherwise the run is unclassified.
SUPPORT = 0.1


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
    # --- optional (added with the period search; older specs leave them out) ---
    # the nouns of each output's axes, for the words of the period search: a mapping
    # {output: ("batch", "channel", "step")} or (params, output) -> tuple; an output or
    # axis without one is "index along dim a"
    axes: Any = None
    # the tile and vector sizes the op's kernels use along an axis noun, e.g.
    # {"column": (8, 32)}: a remainder is named after one of them when it fits
    periods: Mapping[str, Sequence[int]] = field(default_factory=dict)
    # params -> {output: shape}, so that the run-level diagnosis knows the axis lengths of
    # passing items too ("fails only when the number of columns is not a multiple of 8")
    shapes: Optional[Callable[[Mapping], Mapping[str, tuple]]] = None

    def __post_init__(self):
        known = {c.cause for c in self.causes}
        for r in self.rules:
            if r.cause not in known:
                raise ValueError(f"rule for {r.cause} names no CauseSpec")

    def cause_spec(self, value: str) -> Optional[CauseSpec]:
        return next((c for c in self.causes if c.cause.value == value), None)

    def axis_nouns(self, params: Mapping, output: str, ndim: int) -> tuple:
        """One noun per axis of the output; None where the op names none."""
        names = self.axes(params, output) if callable(self.axes) else \
            (self.axes or {}).get(output)
        names = tuple(names or ())
        return tuple(names[a] if a < len(names) else None for a in range(ndim))


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


# ---------------------------------------------------------------- the period search

AXIS_PREFIX = "axis:"  # region names of the period search: axis:a:noun:kind:arg:n
KINDS = ("index", "head", "after", "remainder", "period")
# near ties between kinds go to the simpler one; between periods, a larger P must be this
# much denser than a smaller one to be preferred over it
TIE = 0.01
DENSER = 1.1
MAX_PERIODS = 48  # data-driven candidate periods scanned per axis (plus 2..SMALL_PERIODS)
SMALL_PERIODS = 16
MIN_TILES = 3  # a period is a repeat: wrong elements in at least this many of its tiles


def _plural(noun: str) -> str:
    if noun.endswith("index"):
        return noun[:-5] + "indices"
    if noun.endswith(("s", "x", "ch", "sh")):
        return noun + "es"
    return noun + "s"


def _ordinal(k: int) -> str:
    suffix = "th" if 10 <= k % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th")
    return f"{k}{suffix}"


def _residue_text(res: Sequence[int]) -> str:
    """Sorted residues as runs: 1-3.5.9-11."""
    runs, start = [], None
    res = sorted(res)
    for i, r in enumerate(res):
        if start is None:
            start = r
        if i + 1 == len(res) or res[i + 1] != r + 1:
            runs.append(f"{start}-{r}" if r > start else f"{r}")
            start = None
    return ".".join(runs)


def _parse_residues(text: str) -> frozenset:
    out = set()
    for part in text.split("."):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return frozenset(out)


def remainder_periods(t: int, n: int) -> list:
    """Every P for which [t, n) is exactly what lies past the last multiple of P: P divides
    t and n - t < P (so t = floor(n / P) * P)."""
    if t <= 0 or t >= n:
        return []
    r = n - t
    small = [d for d in range(1, math.isqrt(t) + 1) if t % d == 0]
    divisors = sorted(set(small) | {t // d for d in small})
    return [P for P in divisors if P > r and P >= 2]


@dataclass(frozen=True)
class AxisPattern:
    """Where the wrong elements concentrate along one axis of an output: one index, a
    prefix, every tile of t but the first (i >= t), the remainder past the last multiple
    of P (i >= t, t = floor(n/P) P), or residues of a period P. Stored as a Location
    whose region name encodes it (axis:a:noun:kind:arg:n), so that rows carry it."""

    output: str
    axis: int
    noun: Optional[str]  # None: the op names no noun for this axis
    kind: str  # one of KINDS
    n: int  # the axis length
    t: int = 0  # index (index), length of the prefix (head), first index (after, remainder)
    period: int = 0  # P (period; remainder: the P the words name)
    residues: frozenset = frozenset()  # period: the residues i mod P that are wrong
    share: float = 0.0
    coverage: float = 0.0
    density: float = 0.0
    n_bad: int = 0
    n_region: int = 0

    @property
    def score(self) -> float:
        """Share of the wrong elements inside minus the share of the output it covers."""
        return self.share - self.coverage

    def location(self) -> "Location":
        return Location(self.output, self.region, self.n_bad, self.n_region, self.share,
                        self.density, self.coverage)

    @property
    def region(self) -> str:
        arg = {"period": lambda: f"{self.period}/{_residue_text(self.residues)}",
               "remainder": lambda: f"{self.t}/{self.period}"}.get(
            self.kind, lambda: f"{self.t}")()
        return f"{AXIS_PREFIX}{self.axis}:{self.noun or ''}:{self.kind}:{arg}:{self.n}"

    @classmethod
    def from_location(cls, lo: "Location") -> Optional["AxisPattern"]:
        if not lo.region.startswith(AXIS_PREFIX):
            return None
        try:
            _, a, noun, kind, arg, n = lo.region.split(":")
            t, period, res = 0, 0, frozenset()
            if kind == "period":
                P, _, rtext = arg.partition("/")
                period, res = int(P), _parse_residues(rtext)
            elif kind == "remainder":
                tt, _, P = arg.partition("/")
                t, period = int(tt), int(P)
            else:
                t = int(arg)
        except ValueError:
            return None
        return cls(lo.output, int(a), noun or None, kind, int(n), t, period, res,
                   lo.share, lo.coverage, lo.density, lo.n_bad, lo.n_region)

    # ---- what the rules ask
    @property
    def suffix_start(self) -> Optional[int]:
        """t when the wrong indices are exactly i >= t (the last index included)."""
        if self.kind in ("after", "remainder"):
            return self.t
        if self.kind == "index" and self.t == self.n - 1:
            return self.t
        return None

    def past_multiple_of(self, P: int) -> bool:
        """Wrong exactly past the last multiple of P along this axis (a partial tile)."""
        t = self.suffix_start
        return t is not None and P in remainder_periods(t, self.n)

    def every_tile_but_first(self, min_t: int = 2) -> bool:
        """Wrong in i >= t with at least one whole tile of t after the first."""
        t = self.suffix_start
        return t is not None and t >= min_t and self.n - t >= t

    @property
    def all_but_first(self) -> bool:
        """Wrong in every slice but the first (of two slices: only the last)."""
        return (self.kind == "after" and self.t == 1) or (self.last and self.n == 2)

    @property
    def first(self) -> bool:
        return self.kind == "index" and self.t == 0

    @property
    def last(self) -> bool:
        return self.kind == "index" and self.t == self.n - 1

    # ---- words
    def words(self) -> str:
        noun = self.noun or "index"
        many = _plural(noun)
        along = "" if self.noun else f" along dim {self.axis}"
        if self.kind == "index":
            which = "first" if self.t == 0 else "last" if self.t == self.n - 1 else None
            where = f"the {which} {noun} ({noun} {self.t} of {self.n})" if which else \
                f"{noun} {self.t} (of {self.n})"
            return f"only in {where}{along}"
        if self.kind == "head":
            return f"only in the first {self.t} {many}{along} (of {self.n})"
        if self.kind == "after" and self.t == 1:
            return f"in every {noun} but the first{along} ({many} 1-{self.n - 1})"
        if self.kind == "after":
            return (f"in every {self.t}-{noun} tile but the first{along} ({many} >= "
                    f"{self.t} of {self.n})")
        if self.kind == "remainder":
            r = self.n - self.t
            return (f"only past the last multiple of {self.period} {many}{along} (the last "
                    f"{r} of {self.n}: remainder {r})")
        P, res = self.period, sorted(self.residues)
        k = len(res)
        if k == 1:
            what = f"in every {_ordinal(P)} {noun} (offset {res[0]})"
        elif res == list(range(P - k, P)):
            what = f"in the last {k} {many} of each {P}-{noun} tile"
        elif res == list(range(k)):
            what = f"in the first {k} {many} of each {P}-{noun} tile"
        elif res == list(range(res[0], res[-1] + 1)):
            what = f"in {many} {res[0]}-{res[-1]} of each {P}-{noun} tile"
        else:
            shown = ", ".join(map(str, res[:6])) + (", ..." if k > 6 else "")
            what = f"in {k} of every {P} {many} (offsets {shown})"
        return what + along

    def short(self) -> str:
        """A compact signature for run-level counts: 'column remainder of 8'."""
        noun = self.noun or f"dim {self.axis}"
        if self.kind == "period":
            return f"{noun} period {self.period}"
        if self.kind == "remainder":
            return f"{noun} remainder"
        if self.kind == "after":
            return f"{noun} tiles of {self.t} but the first"
        if self.kind == "index":
            return f"{noun} " + ("first" if self.first else "last" if self.last else
                                 f"index {self.t}")
        return f"{noun} first {self.t}"


def _name_remainder(t: int, n: int, preferred: Sequence[int]) -> int:
    """The P a remainder [t, n) is named after: one of the op's tile sizes that fits, else
    the smallest power of two that fits, else the smallest P that fits. One item cannot
    tell 8 from 16 when t is a multiple of both; the run-level diagnosis can."""
    fits = remainder_periods(t, n)
    for P in preferred:
        if P in fits:
            return P
    twos = [P for P in fits if P & (P - 1) == 0]
    return twos[0] if twos else fits[0]


def _candidate_periods(idx, n: int) -> list:
    """2..SMALL_PERIODS, and the gaps between the starts (and ends) of the runs of wrong
    indices, their gcd, up to n // 2."""
    import numpy as np

    top = n // 2
    cands = set(range(2, min(SMALL_PERIODS, top) + 1))
    if len(idx) > 1:
        gaps = np.diff(idx)
        starts = idx[np.concatenate(([True], gaps > 1))]
        ends = idx[np.concatenate((gaps > 1, [True]))]
        for edge in (starts, ends):
            if len(edge) > 1:
                d = np.diff(edge)
                vals, counts = np.unique(d, return_counts=True)
                cands.update(int(v) for v in vals[np.argsort(-counts)][:MAX_PERIODS // 2])
                cands.add(int(np.gcd.reduce(d)))
    return sorted(P for P in cands if 2 <= P <= top)


def axis_patterns(output: str, bad: torch.Tensor, nouns: Sequence = (),
                  preferred: Optional[Mapping[str, Sequence[int]]] = None) -> list:
    """The AxisPattern of each axis of the output that holds its wrong elements.

    Per axis: the wrong-element mask summed over the other axes (one count per index),
    then a scan of candidate sets of indices, each scored by the share of wrong elements
    inside minus the share of the axis it covers: the index with most errors, the best
    prefix and suffix (one cumulative sum each), and for each candidate period P the
    residues holding more than their share of wrong elements. A pattern holds when it has
    CONCENTRATED of the wrong elements and the rest is clean (CONTRAST). The best holding
    one is kept: simpler kinds win near ties, and a period P wins over a multiple of it
    unless the multiple is denser. Cost: one reduction of the mask per axis, then
    O(n) per candidate period on the wrong indices only."""
    import numpy as np

    preferred, nouns = preferred or {}, nouns or ()
    mask = bad.detach().cpu().numpy()
    n_wrong, numel = int(mask.sum()), mask.size
    found = []
    if not n_wrong or n_wrong == numel:
        return found
    for a, n in enumerate(bad.shape):
        if n < 2:
            continue
        others = tuple(d for d in range(bad.dim()) if d != a)
        cnt = mask.sum(axis=others, dtype=np.int64) if others else mask.astype(np.int64)
        per = numel // n
        noun = nouns[a] if a < len(nouns) else None
        best = _best_on_axis(cnt, n, per, n_wrong, preferred.get(noun, ()) if noun else ())
        if best is not None:
            kind, t, P, res, n_in, k = best
            found.append(AxisPattern(output, a, noun, kind, n, t, P, res,
                                     share=n_in / n_wrong, coverage=k / n,
                                     density=n_in / (k * per), n_bad=n_in,
                                     n_region=k * per))
    return found


def _best_on_axis(cnt, n: int, per: int, W: int, preferred: Sequence[int]):
    """(kind, t, P, residues, wrong inside, indices inside) of the best holding pattern."""
    import numpy as np

    def holds(n_in, k):
        if k >= n or n_in < CONCENTRATED * W:
            return False
        d_in = n_in / (k * per)
        d_out = (W - n_in) / ((n - k) * per)
        return d_out <= CONTRAST * d_in

    options = []  # (score, rank, kind, t, P, residues, n_in, k, density)

    def offer(rank, kind, t, P, res, n_in, k):
        if holds(n_in, k):
            options.append((n_in / W - k / n, rank, kind, t, P, res, n_in, k,
                            n_in / (k * per)))

    j = int(cnt.argmax())
    offer(0, "index", j, 0, frozenset(), int(cnt[j]), 1)
    csum = np.concatenate(([0], np.cumsum(cnt)))
    # wrong indices before each t: a prefix or suffix must be wrong at half its indices
    # at least (three scattered wrong indices past 500 are no "every tile but the first")
    hsum = np.concatenate(([0], np.cumsum(cnt > 0)))
    ts = np.arange(1, n)
    head = csum[1:n] / W - ts / n  # prefix [0, t)
    t = int(ts[head.argmax()])
    if t > 1 and 2 * hsum[t] >= t:
        offer(1, "head", t, 0, frozenset(), int(csum[t]), t)
    tail = (W - csum[1:n]) / W - (n - ts) / n  # suffix [t, n)
    t = int(ts[tail.argmax()])
    if t < n - 1 and 2 * (hsum[n] - hsum[t]) >= n - t:
        if n - t >= t:
            offer(1, "after", t, 0, frozenset(), int(W - csum[t]), n - t)
        else:
            offer(1, "remainder", t, _name_remainder(t, n, preferred), frozenset(),
                  int(W - csum[t]), n - t)
    idx = np.nonzero(cnt)[0]
    weights = cnt[idx]
    periodic = []
    # A period's residues hold CONCENTRATED of the errors, so they span at least the
    # fewest indices that do: its score is at most 1 - that / n. When a simpler pattern
    # is within TIE of it, no period can win (ties go to the simpler kind): skip the scan.
    fewest = int(np.searchsorted(np.cumsum(np.sort(weights)[::-1]), CONCENTRATED * W)) + 1
    if options and max(o[0] for o in options) >= 1 - fewest / n - TIE:
        return _pick(options)
    for P in _candidate_periods(idx, n):
        mod = idx % P
        c = np.bincount(mod, weights=weights, minlength=P)
        r = np.arange(P)
        n_r = n // P + (r < n % P)
        sel = c * n > n_r * W  # residues holding more than their share
        if not sel.any() or sel.all():
            continue
        n_in, k = int(c[sel].sum()), int(n_r[sel].sum())
        # a period needs repeats: wrong elements in MIN_TILES tiles at least, in half the
        # tiles that hold one of its residues, at half the indices of its residues, and
        # MIN_TILES wrong indices per residue on average (a few scattered wrong indices
        # fit some P with a clean rest otherwise: 4 wrong rows are no "3 of every 6")
        in_sel = sel[mod]
        n_idx = int(in_sel.sum())
        tiles = idx[in_sel] // P  # sorted, as idx is
        hit = int(np.count_nonzero(np.diff(tiles))) + 1 if len(tiles) else 0
        reach = n // P + int(bool(sel[:n % P].any()))
        if hit < MIN_TILES or 2 * hit < reach or 2 * n_idx < k or \
                n_idx < MIN_TILES * int(sel.sum()):
            continue
        if holds(n_in, k):
            periodic.append((n_in / W - k / n, 2, "period", 0, P,
                             frozenset(int(x) for x in r[sel]), n_in, k, n_in / (k * per)))
    if periodic:
        top = max(periodic, key=lambda o: o[0])
        # the smallest P that explains them as well, unless a multiple is denser
        fits = [o for o in periodic if o[0] >= top[0] - TIE or
                (o[8] * DENSER >= top[8] and o[0] >= top[0] - 5 * TIE)]
        options.append(min(fits, key=lambda o: o[4]))
    return _pick(options)


def _pick(options):
    """The best option; near ties (TIE) go to the simpler kind, then the smaller P."""
    if not options:
        return None
    top = max(o[0] for o in options)
    pick = min((o for o in options if o[0] >= top - TIE), key=lambda o: (o[1], o[4]))
    _, _, kind, t, P, res, n_in, k, _ = pick
    return kind, t, P, res, n_in, k


# ---------------------------------------------------------------- evidence and rules

@dataclass(frozen=True)
class Evidence:
    """What the rules see about one failing item; rebuilt from a stored row as well."""

    wrong: frozenset  # output names beyond tolerance
    locations: tuple  # of Location
    fits: tuple  # of TermFit
    features: Mapping[str, Any]
    wrong_counts: Mapping[str, tuple] = field(default_factory=dict)  # output -> (n_bad, numel)
    # outputs holding unwritten (poison) or non-finite elements: no rounding story fits
    nonfinite: frozenset = frozenset()

    def f(self, name: str) -> Any:
        return self.features[name]

    def finite(self, output: str) -> bool:
        """The output is wrong by finite amounts only (nothing unwritten, no NaN or inf)."""
        return output in self.wrong and output not in self.nonfinite

    def only(self, *outputs: str) -> bool:
        """Something is wrong, and only among `outputs`."""
        return bool(self.wrong) and self.wrong <= set(outputs)

    def where(self, output: str) -> Optional[Location]:
        """The most specific region holding the output's errors, or None (spread)."""
        held = [lo for lo in self.locations if lo.output == output
                and not lo.region.startswith(AXIS_PREFIX)
                and lo.share >= CONCENTRATED and lo.coverage <= SPECIFIC]
        return min(held, key=lambda lo: lo.coverage) if held else None

    @cached_property
    def memo(self) -> dict:
        """Scratch space for rules that share work on one item (see `fallback`)."""
        return {}

    @cached_property
    def _patterns(self) -> tuple:
        # parsed once: every rule asks (a frozen dataclass still has a __dict__)
        found = [p for p in map(AxisPattern.from_location, self.locations) if p is not None]
        return tuple(sorted(found, key=lambda p: -p.score))

    def patterns(self, output: Optional[str] = None) -> list:
        """The period search's AxisPatterns (of one output, or of every wrong one), the
        most telling (highest score) first."""
        return [p for p in self._patterns
                if (p.output == output if output else p.output in self.wrong)]

    def along(self, output: str, axis) -> Optional[AxisPattern]:
        """The output's pattern along one axis (its noun, or its index), or None."""
        if output not in self.wrong:
            return None
        return next((p for p in self.patterns(output)
                     if (p.axis == axis if isinstance(axis, int) else p.noun == axis)), None)

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
        """Wrong with no region (of at most LOCALISED of it) holding the errors, neither
        one of the op's nor a pattern of the period search along any axis, and no term
        that explains much of it."""
        return (output in self.wrong
                and not any(lo.output == output and lo.share >= CONCENTRATED
                            and lo.coverage <= LOCALISED for lo in self.locations)
                and not any(t.residual <= PARTIAL_RESIDUAL for t in self.fits
                            if t.output == output))

    @classmethod
    def from_row(cls, row: "ResultRow", spec: DiagnosisSpec) -> "Evidence":
        wrong, counts, nonfinite = set(), {}, set()
        for o in row.outputs or ():
            if _output_wrong(o):
                wrong.add(o["name"])
                counts[o["name"]] = (int(o["n_bad"]), int(o["numel"]))
                if o["n_unwritten"] or o["n_nonfinite"]:
                    nonfinite.add(o["name"])
        locs = tuple(Location(**lo) for lo in row.error_locations or ())
        fits = tuple(TermFit(**t) for t in row.error_terms or ())
        return cls(frozenset(wrong), locs, fits, spec.case_features(row.params), counts,
                   frozenset(nonfinite))


def _output_wrong(o: Mapping) -> bool:
    return bool(o["n_unwritten"] or o["n_nonfinite"] or o["err"] > o["allowed"])


def candidates(spec: DiagnosisSpec, ev: Evidence) -> tuple:
    """Cause values whose rules hold, in table order, each once."""
    seen = []
    for r in spec.rules:
        if r.cause.value not in seen and r.when(ev):
            seen.append(r.cause.value)
    return tuple(seen)


# ---------------------------------------------------------------- generic causes

class Generic(enum.Enum):
    """Causes the period search can name for any op (an op opts in by listing
    GENERIC_CAUSES, or some of them, and rules from GENERIC_RULES in its spec)."""

    REMAINDER = "remainder"
    TILE_OFFSET = "tile_offset"
    STRIDE = "stride"
    TILE_POSITION = "tile_position"
    FIRST_INDEX = "first_index"
    LAST_INDEX = "last_index"
    ONE_INDEX = "one_index"


GENERIC_CAUSES = (
    CauseSpec(Generic.REMAINDER, "the partial tile past the last multiple of a tile size "
              "mishandled", "the remainder loop or the predication of the last, partial "
              "tile or vector: its bound, its mask, its offset"),
    CauseSpec(Generic.TILE_OFFSET, "per-tile offset wrong (every tile but the first)",
              "the base offset of each tile (tile index x tile size) in its loads and "
              "stores: tile 0 is right because its offset is 0"),
    CauseSpec(Generic.STRIDE, "stride or layout handling wrong (every slice but the first)",
              "the stride between consecutive rows or slices: a padded or rounded leading "
              "dimension, or a layout taken for contiguous"),
    CauseSpec(Generic.TILE_POSITION, "fixed positions within every tile wrong",
              "the indexing of lanes or rows inside a tile: the elements at these offsets "
              "share or skip some work"),
    CauseSpec(Generic.FIRST_INDEX, "the first element along an axis mishandled",
              "an off-by-one at the start of a loop, or a special case for index 0"),
    CauseSpec(Generic.LAST_INDEX, "the last element along an axis not handled (a bound "
              "off by one)", "loop and grid bounds: < n against < n - 1, the rounding of "
              "the grid size, the last block's early exit"),
    CauseSpec(Generic.ONE_INDEX, "a single index along an axis wrong",
              "that index's load, store or mask: an indexing special case"),
)


def generic_causes(**requires: Callable[[Mapping], bool]) -> tuple:
    """GENERIC_CAUSES with the features an op knows each needs: generic_causes(
    remainder=lambda f: f["partial_vector"]) (keys: Generic values)."""
    from dataclasses import replace

    unknown = set(requires) - {g.value for g in Generic}
    if unknown:
        raise ValueError(f"not generic causes: {sorted(unknown)}")
    return tuple(replace(c, requires=requires[c.cause.value]) if c.cause.value in requires
                 else c for c in GENERIC_CAUSES)


def _any_pattern(test: Callable[[AxisPattern], bool]) -> Callable[[Evidence], bool]:
    return lambda e: any(test(p) for p in e.patterns())


def along_axis(output: str, axis,
               test: Callable[[AxisPattern], bool]) -> Callable[[Evidence], bool]:
    """A rule's test: `output` is wrong with a pattern along `axis` (noun or index) that
    passes `test`, e.g. along_axis("dx", "column", lambda p: p.past_multiple_of(8))."""
    def check(e: Evidence) -> bool:
        p = e.along(output, axis)
        return p is not None and test(p)
    return check


GENERIC_RULES = (
    Rule(Generic.REMAINDER, _any_pattern(lambda p: p.kind == "remainder")),
    Rule(Generic.TILE_OFFSET, _any_pattern(lambda p: p.kind == "after" and p.t >= 2)),
    Rule(Generic.STRIDE, _any_pattern(lambda p: p.kind == "after" and p.t == 1)),
    Rule(Generic.TILE_POSITION, _any_pattern(lambda p: p.kind == "period")),
    Rule(Generic.FIRST_INDEX, _any_pattern(lambda p: p.first)),
    Rule(Generic.LAST_INDEX, _any_pattern(lambda p: p.last)),
    Rule(Generic.ONE_INDEX, _any_pattern(
        lambda p: p.kind == "index" and not p.first and not p.last)),
)


def fallback(rules: Sequence[Rule], extra: Sequence[Rule] = GENERIC_RULES) -> tuple:
    """`extra` rules that name their cause only when none of `rules` holds: for an op
    whose own rules should keep the word where they have one."""
    rules = tuple(rules)
    key = ("fallback", id(rules))

    def none_holds(e: Evidence) -> bool:
        memo = e.memo  # asked once per generic rule: the op's rules run once per item
        if key not in memo:
            memo[key] = not any(o.when(e) for o in rules)
        return memo[key]

    def only_if_none(r):
        return Rule(r.cause, lambda e: none_holds(e) and r.when(e))
    return tuple(only_if_none(r) for r in extra)


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


def _flat(v) -> torch.Tensor:
    """A tensor, or a list of tensors (a list output) as one 1-D tensor, as the verdicts
    compare it."""
    if isinstance(v, (list, tuple)):
        return torch.cat([x.reshape(-1) for x in v]) if v else torch.zeros(0)
    return v


def diagnose_item(spec: DiagnosisSpec, params: Mapping, tensors: Mapping, attrs: Mapping,
                  golden: Mapping, actual: Mapping, checks: Sequence) -> ItemDiagnosis:
    """Localise the wrong elements of every failing output and name candidate causes.

    `tensors` are the case inputs in float64 on the golden's device; `checks` are the
    verdicts' OutputCheck records (name, allowed, scale, failure). A list output (a
    parameter list) is measured as the verdicts compare it, its tensors concatenated;
    its regions and terms are over that 1-D whole (a term may be a list as well), and the
    period search runs along the list index."""
    wrong = frozenset(c.name for c in checks if c.failure is not None)
    locations, fits, counts, docs = [], [], {}, {}
    errors = {}
    for c in checks:
        if c.name not in wrong:
            continue
        g, a = golden[c.name], actual[c.name]
        sizes = [x.numel() for x in g] if isinstance(g, (list, tuple)) else None
        g = _flat(g)
        a = _flat(a).to(g.device, torch.float64)
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
    located = Evidence(frozenset(errors), tuple(locations), (), features, counts)
    for out_name, terms in spec.terms(params, tensors, attrs, located).items():
        for t in terms:
            docs[(out_name, t.name)] = t.doc
            if isinstance(t.value, (list, tuple)):  # a list output's term: one per tensor
                t = Term(t.name, t.doc, _flat(t.value))
            tf = fit_term(out_name, errors[out_name], t) if out_name in errors else None
            if tf is not None:
                fits.append(tf)
    ev = Evidence(wrong, tuple(locations), tuple(fits), features, counts,
                  frozenset(wrong - set(errors)))
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
        # among the exact fits, the one whose coefficient is nearest +-1: collinear terms
        # (the gradient times two constants) fit alike, and +-1 is a hypothesis held
        exact = [t for t in ev.fits if t.output == o and t.residual <= EXACT_RESIDUAL]
        best = min(exact, key=lambda t: abs(abs(t.coef) - 1), default=None)
        if best is not None:
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
            coverage=fail_need / n_need if n_need else 0.0, score=ll_items + ll_feat,
            support=sum(1 for c, bad in zip(cands, failed) if bad and v in c)))
    scores.sort(key=lambda sc: -sc.score)
    return scores


def _default_spec_for(op_name: str) -> Optional[DiagnosisSpec]:
    from bwd_suite.suite import registry

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
    many = _plural(noun or "index") + ("" if noun else f" along dim {axis}")
    words = (f"{out} wrong past the last multiple of {P} {many} in {len(hits)} "
             f"item{'s' if len(hits) != 1 else ''}")
    if lengths is not None:
        multiples = [n for n in lengths if n is not None and n % P == 0]
        if multiples:
            words += f"; fails only when the number of {many} is not a multiple of {P}"
    pts = [(p.n - p.suffix_start, _max_abs(rs[i], out)) for i, p in hits]
    pts = [(x, y) for x, y in pts if y is not None and math.isfinite(y)]
    if len(pts) >= MIN_TREND_ITEMS and len({x for x, _ in pts}) >= 3:
        rho = _spearman([x for x, _ in pts], [y for _, y in pts])
        if rho >= MIN_TREND_RHO:
            words += f"; error grows with the remainder (rank corr. {rho:.2f})"
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
                  and _output_wrong(o)), None)
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
        return RunDiagnosis(op_name, impl, len(rs), n_fail, None, "unclassified",
                            f"unclassified: {head}{unsupported}", tuple(scores),
                            tuple(effects))
    cs = spec.cause_spec(best.cause)
    return RunDiagnosis(op_name, impl, len(rs), n_fail, best.cause, cs.title,
                        f"likely {cs.title}: {head}", tuple(scores), tuple(effects))
