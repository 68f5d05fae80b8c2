"""Per-output error metrics of one item, as the suite stored them (`outputs` column)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from bwd_suite.reports import fmt


@dataclass(frozen=True)
class OutputMetrics:
    name: str
    tol_class: str
    err: fmt.Num  # max |impl - golden| / max |golden|
    allowed: fmt.Num
    over: fmt.Num  # err / allowed: above 1 fails
    max_abs: fmt.Num
    max_rel: fmt.Num
    rel_l2: fmt.Num
    n_bad: fmt.Num
    numel: fmt.Num
    n_nonfinite: fmt.Num
    n_unwritten: fmt.Num
    worst_index: str
    failing: bool
    flags: str  # "3 non-finite, 80 unwritten" when any


def _get(o, key):
    return o.get(key) if hasattr(o, "get") else None


def over_allowed(o) -> Optional[float]:
    err, allowed = fmt.value(_get(o, "err")), fmt.value(_get(o, "allowed"))
    if err is None or allowed is None or allowed <= 0:
        return None
    return err / allowed


def failing(o) -> bool:
    over = over_allowed(o)
    return bool((fmt.value(_get(o, "n_bad")) or 0) > 0
                or (fmt.value(_get(o, "n_nonfinite")) or 0) > 0
                or (fmt.value(_get(o, "n_unwritten")) or 0) > 0
                or (over is not None and over > 1))


def metrics(o) -> OutputMetrics:
    return OutputMetrics(
        name=str(_get(o, "name") or "?"), tol_class=str(_get(o, "tol_class") or ""),
        err=fmt.sig(_get(o, "err")), allowed=fmt.sig(_get(o, "allowed")),
        over=fmt.times(over_allowed(o)), max_abs=fmt.sig(_get(o, "max_abs")),
        max_rel=fmt.sig(_get(o, "max_rel")), rel_l2=fmt.sig(_get(o, "rel_l2")),
        n_bad=fmt.count(_get(o, "n_bad")), numel=fmt.count(_get(o, "numel")),
        n_nonfinite=fmt.count(_get(o, "n_nonfinite")),
        n_unwritten=fmt.count(_get(o, "n_unwritten")),
        worst_index=str(_get(o, "worst_index") or ""), failing=failing(o),
        flags=", ".join(f"{int(n):,} {what}" for key, what in (("n_nonfinite", "non-finite"),
                                                               ("n_unwritten", "unwritten"))
                        for n in [fmt.value(_get(o, key)) or 0] if n))


def of(value) -> list:
    """The outputs list of a row (an array of dicts, or None)."""
    return [] if value is None or isinstance(value, float) else list(value)


def worst(value) -> tuple:
    """(name, err/allowed) of the output closest to (or furthest past) its tolerance."""
    best = (None, None)
    for o in of(value):
        over = over_allowed(o)
        if over is not None and (best[1] is None or over > best[1]):
            best = (_get(o, "name"), over)
    return best
