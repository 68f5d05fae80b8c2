"""Covering arrays for case-file sweeps: every t-tuple of values, not every combination.

A sweep with `combine = "pairwise"` (strength 2) or `strength = t` asks for a set of
cases in which every pair (every t-tuple) of values of its list-valued keys appears at
least once, instead of their cartesian product. `cover` builds one.

Method: a deterministic greedy construction in the style of AETG (one case at a time).

1. Every t-tuple of values (a t-subset of the keys and one value of each) is checked for
   a valid completion: a full assignment holding it that no `exclude` matches and that
   the op's `check_case` accepts. A tuple without one cannot be covered; it is reported
   with the reason (`Covering.uncoverable`), never silently dropped, and not an error.
   Smaller tuples are checked first, so a value that fits no valid case is reported
   once, not with every key it meets.
2. While tuples remain uncovered, one new case is built: it starts from an uncovered
   tuple of the key subset with the most uncovered tuples left (the first such tuple, in
   index order); the other keys are then assigned one at a time, the key taking part in
   the most uncovered tuples first, each the value that covers the most uncovered tuples
   with the keys assigned so far (ties: the value taking part in the most uncovered
   tuples, then the first listed). A value is only taken when the partial assignment can
   still be completed into a valid case, so every case is valid and an impossible
   combination is never produced: the greedy choice moves to another value that still
   covers the tuples it was after.
3. Cases whose every tuple is also covered by another case are dropped (last first), and
   the cases are sorted by their value positions in the sweep's lists.

Validity of a partial assignment is decided exactly, without enumerating the product:
`exclude` tables are partial patterns, and `check_case` is called with a mapping that
raises `Unassigned` (a BaseException, so a broad `except Exception` in a check does not
swallow it) when the check reads a key not assigned yet. A check that returns without
reading an unassigned key has the same answer for every completion; one that reads one
makes the search branch on that key only. A check must be a pure function of the values
it reads (ops' `check_case` functions are).

Determinism: keys in the order given, values in list order, ties broken by position;
no `hash()`-dependent or set iteration order anywhere. Same input, same cases, same order,
on every machine and Python version. Pairwise generation never expands the cartesian
product: its work grows with the number of pairs; strength t enumerates the t-tuples.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

# Partial assignments one feasibility question may evaluate before `cover` gives up with
# CoveringError (only a check that reads many keys and refuses most completions gets near).
SEARCH_BUDGET = 200_000
# Candidate cases built for each case kept (each from another seed tuple).
CANDIDATES = 8


class Unassigned(BaseException):
    """Raised inside a check that reads a key the partial assignment has not set."""

    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


class CoveringError(Exception):
    """The constraints could not be decided within SEARCH_BUDGET evaluations."""


@dataclass(frozen=True)
class Uncoverable:
    """Values no valid case can hold together, with why (the refusal most of the search's
    dead ends gave, the first seen of those on a tie): a
    t-tuple, or a smaller tuple (a single value) when already that one is impossible, in
    which case no t-tuple holding it is reported."""

    values: tuple  # ((key, value), ...) in key order
    reason: str

    def text(self) -> str:
        return ", ".join(f"{k}={v!r}" for k, v in self.values)


@dataclass(frozen=True)
class Covering:
    strength: int
    rows: tuple  # dicts key -> value, one per case, every t-tuple covered
    uncoverable: tuple  # Uncoverable, in tuple order
    tuples: int  # t-tuples of values in all (covered or not)

    def __len__(self) -> int:
        return len(self.rows)


def tuple_count(domains: Mapping[str, Sequence], strength: int) -> int:
    """How many t-tuples of values the keys hold (the work of a covering, and an upper
    bound of its size), without enumerating them."""
    sizes = [len(v) for v in domains.values()]
    # elementary symmetric polynomial e_t(sizes), by dynamic programming
    e = [1] + [0] * strength
    for s in sizes:
        for j in range(strength, 0, -1):
            e[j] += e[j - 1] * s
    return e[strength]


class _View(Mapping):
    """The values of a partial assignment as a check sees them: fixed values, assigned
    swept values; reading an unassigned swept key raises Unassigned."""

    __slots__ = ("_fixed", "_keys", "_index", "_domains", "_assign")

    def __init__(self, fixed, keys, index, domains, assign):
        self._fixed, self._keys, self._index = fixed, keys, index
        self._domains, self._assign = domains, assign

    def __getitem__(self, key):
        i = self._index.get(key)
        if i is None:
            return self._fixed[key]
        a = self._assign[i]
        if a < 0:
            raise Unassigned(key)
        return self._domains[i][a]

    def __contains__(self, key):
        return key in self._index or key in self._fixed

    def __iter__(self):
        yield from self._fixed
        yield from self._keys

    def __len__(self):
        return len(self._fixed) + len(self._keys)


class _Problem:
    def __init__(self, domains, fixed, excludes, check):
        self.keys = list(domains)
        self.domains = [list(v) for v in domains.values()]
        self.index = {k: i for i, k in enumerate(self.keys)}
        self.fixed = {k: v for k, v in fixed.items() if k not in self.index}
        self.check = check
        self.evaluations = 0
        self.memo: dict = {}
        # excludes as patterns over the swept keys; those contradicted by a fixed value
        # can never match and are dropped
        self.excludes = []
        for e in excludes:
            pattern, possible = [], True
            for k, v in e.items():
                if k in self.index:
                    i = self.index[k]
                    pattern.append((i, [j for j, d in enumerate(self.domains[i]) if d == v]))
                elif self.fixed.get(k, _MISSING) != v:
                    possible = False
            if possible:
                self.excludes.append((pattern, (tuple(e), f"excluded by {_shown(e)}")))

    def evaluate(self, assign):
        """("dead", (blamed keys, reason)) | ("ok", None) | ("open", key index to
        branch on)."""
        branch = None
        for pattern, shown in self.excludes:
            pending = None
            for i, allowed in pattern:
                a = assign[i]
                if a < 0:
                    if pending is None:
                        pending = i
                elif a not in allowed:
                    break
            else:
                if pending is None:
                    return "dead", shown
                if branch is None:
                    branch = pending
        try:
            reason = self.check(_View(self.fixed, self.keys, self.index, self.domains, assign))
        except Unassigned as u:
            if branch is None:
                branch = self.index[u.key]
        else:
            if reason:
                if isinstance(reason, str):
                    return "dead", ((), reason)
                return "dead", ((reason[0],), reason[1])
        return ("ok", None) if branch is None else ("open", branch)

    def feasible(self, assign) -> Optional[str]:
        """None when the partial assignment has a valid completion, else the reason: of
        the refusals its search met, one blaming an assigned key if there is one, the
        most frequent (the first seen on a tie)."""
        self.evaluations = 0
        dead = self._search(list(assign))
        if dead is None:
            return None
        mine = {self.keys[i] for i, a in enumerate(assign) if a >= 0}
        ranked = [(any(k in mine for k in blame), n, text)
                  for (blame, text), n in dead.items()]
        best = max(ranked, key=lambda r: (r[0], r[1]))  # max keeps the first of equals
        return best[2]

    def _search(self, assign) -> Optional[dict]:
        """None when a valid completion exists; else (blamed keys, reason) -> how many
        dead ends of the search (refused partial assignments) gave it, in the order
        first seen."""
        key = tuple(assign)
        if key in self.memo:
            return self.memo[key]
        self.evaluations += 1
        if self.evaluations > SEARCH_BUDGET:
            raise CoveringError(f"the constraints were not decided within {SEARCH_BUDGET:,} "
                                "partial evaluations")
        state, what = self.evaluate(assign)
        if state == "ok":
            result = None
        elif state == "dead":
            result = {what: 1}
        else:
            result = {}
            for v in range(len(self.domains[what])):
                assign[what] = v
                r = self._search(assign)
                if r is None:
                    result = None
                    break
                for reason, n in r.items():
                    result[reason] = result.get(reason, 0) + n
            assign[what] = -1
        self.memo[key] = result
        return result


_MISSING = object()


def _shown(e: Mapping) -> str:
    return "{" + ", ".join(f"{k} = {v!r}" for k, v in e.items()) + "}"


def cover(domains: Mapping[str, Sequence], strength: int = 2,
          fixed: Optional[Mapping] = None, excludes: Sequence[Mapping] = (),
          check: Optional[Callable[[Mapping], Optional[str]]] = None) -> Covering:
    """A covering array of `strength` over `domains` (key -> its values, in order).

    `fixed`: the values of the other keys (a check sees them too). `excludes`: tables
    key -> value; a case matching every key of one is invalid. `check`: values ->
    the reason a combination is impossible (a text, or (key, text) naming the key it
    blames), or None; it may read any key of `domains` and `fixed` (see the module
    docstring). Returns the rows (dicts over the keys of
    `domains`) and the t-tuples that no valid case can hold."""
    fixed = dict(fixed or {})
    n = len(domains)
    if not 1 <= strength <= n:
        raise ValueError(f"strength {strength} needs between 1 and {n} keys")
    if any(len(v) == 0 for v in domains.values()):
        raise ValueError("every key needs at least one value")
    prob = _Problem(domains, fixed, excludes, check or (lambda values: None))
    sizes = [len(d) for d in prob.domains]
    subsets = list(itertools.combinations(range(n), strength))
    # radix[s][j]: the weight of key subsets[s][j] in the tuple's index within its subset
    radix = []
    for sub in subsets:
        w, weights = 1, []
        for i in reversed(sub):
            weights.append(w)
            w *= sizes[i]
        radix.append(tuple(reversed(weights)))
    # uncovered[s][idx]: 1 while tuple idx of subset s is uncovered (and coverable)
    uncovered = [bytearray(math.prod(sizes[i] for i in sub)) for sub in subsets]
    left = [0] * len(subsets)
    by_value = [[0] * s for s in sizes]  # uncovered tuples holding value v of key i
    uncoverable = []
    total = 0
    blank = [-1] * n

    def refusal(sub, vals):
        assign = list(blank)
        for i, v in zip(sub, vals):
            assign[i] = v
        return prob.feasible(assign)

    def report(sub, vals, why):
        uncoverable.append(Uncoverable(
            tuple((prob.keys[i], prob.domains[i][v]) for i, v in zip(sub, vals)), why))

    # smaller tuples first: a value (or a pair, for strength 3) no valid case can hold is
    # reported once, not in every t-tuple that holds it
    dead = set()  # (key subset, values) refused; only looked up, never iterated

    def holds_dead(sub, vals):
        return any((part, tuple(vals[sub.index(i)] for i in part)) in dead
                   for j in range(1, len(sub))
                   for part in itertools.combinations(sub, j))

    for j in range(1, strength):
        for sub in itertools.combinations(range(n), j):
            for vals in itertools.product(*(range(sizes[i]) for i in sub)):
                if holds_dead(sub, vals):
                    continue
                why = refusal(sub, vals)
                if why is not None:
                    dead.add((sub, vals))
                    report(sub, vals, why)
    for s, sub in enumerate(subsets):
        for vals in itertools.product(*(range(sizes[i]) for i in sub)):
            total += 1
            if holds_dead(sub, vals):
                continue
            why = refusal(sub, vals)
            if why is None:
                idx = sum(v * w for v, w in zip(vals, radix[s]))
                uncovered[s][idx] = 1
                left[s] += 1
                for i, v in zip(sub, vals):
                    by_value[i][v] += 1
            else:
                report(sub, vals, why)
    # per key i, the subsets holding it: (subset, its other keys with their weights, the
    # weight of i), for the gains
    holding = [[(s, [(j, w) for j, w in zip(sub, radix[s]) if j != i],
                 radix[s][sub.index(i)])
                for s, sub in enumerate(subsets) if i in sub] for i in range(n)]

    def tuple_index(s, assign):
        return sum(assign[i] * w for i, w in zip(subsets[s], radix[s]))

    def mark_covered(assign):
        for s in range(len(subsets)):
            idx = tuple_index(s, assign)
            if uncovered[s][idx]:
                uncovered[s][idx] = 0
                left[s] -= 1
                for i in subsets[s]:
                    by_value[i][assign[i]] -= 1

    def build(s, idx):
        """One case grown from tuple idx of subset s; with the tuples it newly covers."""
        assign = list(blank)
        for i, w in zip(subsets[s], radix[s]):
            assign[i] = (idx // w) % sizes[i]
        rest = [i for i in range(n) if assign[i] < 0]
        rest.sort(key=lambda i: (-sum(by_value[i]), i))
        # once no exclude can match and the check is decided, every completion is valid
        free = prob.evaluate(assign)[0] == "ok"
        for i in rest:
            # the subsets of i whose other keys are assigned, with their index so far
            ready = []
            for s2, others, wi in holding[i]:
                base = 0
                for j, w in others:
                    if assign[j] < 0:
                        break
                    base += assign[j] * w
                else:
                    ready.append((uncovered[s2], base, wi))
            best, best_score = -1, None
            for v in range(sizes[i]):
                assign[i] = v
                gain = 0
                for flags, base, wi in ready:
                    gain += flags[base + v * wi]
                score = (gain, by_value[i][v])
                if best_score is not None and score <= best_score:
                    continue
                if free or prob.feasible(assign) is None:
                    best, best_score = v, score
            assign[i] = best  # the current assignment is feasible, so some value fits
            free = free or prob.evaluate(assign)[0] == "ok"
        gain = sum(uncovered[s2][tuple_index(s2, assign)] for s2 in range(len(subsets)))
        return gain, assign

    rows = []
    while any(left):
        # candidates grown from the first uncovered tuple of each of the CANDIDATES
        # subsets with the most tuples left; the one covering the most is kept
        order = sorted(range(len(subsets)), key=lambda j: (-left[j], j))
        best = None
        for s in order[:CANDIDATES]:
            if not left[s]:
                break
            cand = build(s, uncovered[s].index(1))
            if best is None or cand[0] > best[0]:
                best = cand
        rows.append(tuple(best[1]))
        mark_covered(best[1])

    # drop cases whose tuples are all covered by other cases, the last ones first
    counts = [dict() for _ in subsets]
    for row in rows:
        for s in range(len(subsets)):
            idx = tuple_index(s, row)
            counts[s][idx] = counts[s].get(idx, 0) + 1
    kept = []
    for row in reversed(rows):
        idxs = [tuple_index(s, row) for s in range(len(subsets))]
        if all(counts[s][idx] > 1 for s, idx in enumerate(idxs)):
            for s, idx in enumerate(idxs):
                counts[s][idx] -= 1
        else:
            kept.append(row)
    kept.sort()
    return Covering(
        strength=strength,
        rows=tuple({k: prob.domains[i][row[i]] for i, k in enumerate(prob.keys)}
                   for row in kept),
        uncoverable=tuple(uncoverable), tuples=total)
