"""Numbers as the report shows them: text for people next to the full-precision value
(emitted as a data attribute, so tests and scripts can read the page back exactly)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional

from bwd_suite.suite import units

MISSING = "—"


@dataclass(frozen=True)
class Num:
    raw: str  # repr of the value, "" when missing
    text: str

    @property
    def missing(self) -> bool:
        return not self.raw


NONE = Num("", MISSING)


def value(v) -> Optional[float]:
    """A float, or None for None / NaN / pandas NA."""
    if v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def _num(v, text: Callable[[float], str], as_int: bool = False) -> Num:
    f = value(v)
    if f is None:
        return NONE
    return Num(repr(int(f)) if as_int else repr(f), text(f))


# the text of each unit is suite/units.py's, which the terminal prints too
def seconds(v) -> Num:
    return _num(v, units.seconds)


def millis(v) -> Num:
    """Milliseconds shown as a time (raw stays the milliseconds)."""
    return _num(v, lambda f: units.seconds(f / 1e3))


def nbytes(v) -> Num:
    return _num(v, units.nbytes, as_int=True)


def nflops(v) -> Num:
    return _num(v, lambda f: units.scaled(f, units.FLOPS), as_int=True)


def count(v) -> Num:
    return _num(v, lambda f: f"{int(f):,}", as_int=True)


def fixed(v, digits: int = 1) -> Num:
    return _num(v, lambda f: f"{f:,.{digits}f}")


def rate(v) -> Num:
    """GB/s and the like: whole numbers from 100 up, 3 significant digits below."""
    return _num(v, units.rate)


def sig(v, digits: int = 3) -> Num:
    """Significant digits, for errors and tolerances spanning many decades."""
    return _num(v, lambda f: f"{f:.{digits}g}")


def percent(v) -> Num:
    """A fraction shown as a percentage (raw stays the fraction)."""
    return _num(v, units.percent)


def plain(f: float, digits: int = 3) -> str:
    """A positive or negative number in plain digits, never in scientific notation: `digits`
    significant ones below 10**digits (2.88, 28.8, 0.000347), whole numbers with thousands
    separators above (2,880)."""
    if f == 0 or not math.isfinite(f):
        return f"{f:g}"
    # decimals enough for `digits` significant ones, trailing zeros dropped as :g does
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(f))))
    if abs(round(f, decimals)) >= 10 ** digits:
        return f"{f:,.0f}"
    text = f"{f:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def times(v) -> Num:
    """A ratio or speedup: ×1.23, ×0.0347, ×2,880 (never ×2.88e+03)."""
    return _num(v, lambda f: f"×{plain(f)}")


def pvalue(v) -> Num:
    return _num(v, lambda f: f"{f:.2g}")


def time_text(seconds_value: float) -> str:
    return seconds(seconds_value).text


def bytes_text(n: float) -> str:
    return nbytes(n).text


def flops_text(n: float) -> str:
    return nflops(n).text
