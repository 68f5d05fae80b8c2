"""What one failing output measures against the op's declarations: which elements are
wrong, how they sit in each region (`Location`), and how well each reference term explains
the error (`TermFit`). Rows store both records, so a run can weigh them later."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Optional

import torch

from bwd_suite.suite.diagnosis.vocabulary import Region, Term


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

