"""The period search: along each axis of a wrong output, the simplest set of indices that
holds its wrong elements (one index, a prefix, every tile but the first, the remainder
past the last multiple of P, residues of a period P), as an `AxisPattern`."""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

import numpy as np
import torch

from bwd_suite.suite.diagnosis.axis_pattern import AxisPattern, remainder_periods
from bwd_suite.suite.diagnosis.evidence import CONCENTRATED

# An axis pattern holds when it has CONCENTRATED of the wrong elements and the elements
# outside it are wrong at most CONTRAST times as often as those inside (a clean rest).
CONTRAST = 0.1
# near ties between kinds go to the simpler one; between periods, a larger P must be this
# much denser than a smaller one to be preferred over it
TIE = 0.01
DENSER = 1.1
MAX_PERIODS = 48  # data-driven candidate periods scanned per axis (plus 2..SMALL_PERIODS)
SMALL_PERIODS = 16
MIN_TILES = 3  # a period is a repeat: wrong elements in at least this many of its tiles


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
    CONCENTRATED of the wrong elements, the rest is clean (CONTRAST) and a comparable part
    of the axis outside it has no wrong element (`passed_beside`). The best holding
    one is kept: simpler kinds win near ties, and a period P wins over a multiple of it
    unless the multiple is denser. Cost: one reduction of the mask per axis, then
    O(n) per candidate period on the wrong indices only."""
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
    def holds(n_in, k):
        if k >= n or n_in < CONCENTRATED * W:
            return False
        d_in = n_in / (k * per)
        d_out = (W - n_in) / ((n - k) * per)
        return d_out <= CONTRAST * d_in

    options = []  # (score, rank, kind, t, P, residues, n_in, k, density)

    def offer(rank, kind, t, P, res, n_in, k):
        if holds(n_in, k) and passed_beside(cnt, kind, t, P, res):
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
        res = frozenset(int(x) for x in r[sel])
        if holds(n_in, k) and passed_beside(cnt, "period", 0, P, res):
            periodic.append((n_in / W - k / n, 2, "period", 0, P, res, n_in, k,
                             n_in / (k * per)))
    if periodic:
        top = max(periodic, key=lambda o: o[0])
        # the smallest P that explains them as well, unless a multiple is denser
        fits = [o for o in periodic if o[0] >= top[0] - TIE or
                (o[8] * DENSER >= top[8] and o[0] >= top[0] - 5 * TIE)]
        options.append(min(fits, key=lambda o: o[4]))
    return _pick(options)


def passed_beside(cnt, kind: str, t: int, P: int, residues: frozenset) -> bool:
    """The contrast a claim about a set of indices needs: a comparable part of the axis
    outside it without a wrong element. "Only in row 7" needs another row that passed;
    "every tile but the first" a first tile that passed; "only past the last multiple of
    P" a whole tile of P before it that passed; fixed positions of each P-tile a tile
    whose other positions all passed; "only in the first t" an index past them."""
    clean = np.asarray(cnt) == 0
    n = len(clean)
    if kind == "index":
        return bool(clean.sum() - clean[t])
    if kind == "head":
        return bool(clean[t:].any())
    if kind == "after":
        return bool(clean[:t].all())
    if kind == "remainder":
        return t >= P > 0 and bool(clean[:t // P * P].reshape(-1, P).all(axis=1).any())
    full = n // P * P  # period: the whole P-tiles, their positions outside the residues
    if not full:
        return False
    outside = np.array([i not in residues for i in range(P)])
    return bool(clean[:full].reshape(-1, P)[:, outside].all(axis=1).any())


def _pick(options):
    """The best option; near ties (TIE) go to the simpler kind, then the smaller P."""
    if not options:
        return None
    top = max(o[0] for o in options)
    pick = min((o for o in options if o[0] >= top - TIE), key=lambda o: (o[1], o[4]))
    _, _, kind, t, P, res, n_in, k, _ = pick
    return kind, t, P, res, n_in, k

