"""The record of the period search (period_search.py): where the wrong elements of one
output concentrate along one axis, encoded in a region name so that rows carry it, and
the words the diagnosis says about it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence

from bwd_suite.suite.diagnosis.measurements import Location

AXIS_PREFIX = "axis:"  # region names of the period search: axis:a:noun:kind:arg:n
KINDS = ("index", "head", "after", "remainder", "period")


def plural(noun: str) -> str:
    """An axis noun in the plural, for the words here and in the run line."""
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
        many = plural(noun)
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
