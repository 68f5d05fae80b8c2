"""Statistics of an adamw item (OpSpec.case_stats): how the stored parameters moved
against the exact update, over every element of every parameter tensor ("swallowed
updates": a 16-bit parameter whose update is below half its spacing never moves).

With `before` the stored parameter before the call (its dtype), `after` the
implementation's stored parameter after it, and `exact` the golden's float64 parameter
(with master weights the exact master):

- swallowed_fraction: of the elements whose exact update is nonzero (exact != before),
  the fraction whose stored value did not move (after == before);
- exact_unchanged_fraction: the fraction of elements where exact, rounded to nearest in
  the parameter dtype, is before (the right result is that the parameter stays);
- amplification: over the elements whose exact update exceeds half the spacing above
  before (enough to move the stored value), the median of |after - before| / |exact -
  before|: 1 is right, more means the rounding amplified the update (left out when no
  element qualifies);
- n_elements.
"""

from __future__ import annotations

from typing import Mapping

import torch

from bwd_suite.suite.opspec import CaseInputs, tensor_list


def spacing(x: torch.Tensor) -> torch.Tensor:
    """The spacing of x's dtype at x, toward +inf, in float64."""
    up = torch.nextafter(x, torch.full_like(x, float("inf")))
    return up.to(torch.float64) - x.to(torch.float64)


def _even(x: torch.Tensor) -> torch.Tensor:
    """Whether the last significand bit of each element is 0 (round half to even)."""
    ints = {2: torch.int16, 4: torch.int32, 8: torch.int64}[x.element_size()]
    return (x.contiguous().view(ints) & 1) == 0


def round_to(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """float64 x rounded once to nearest (ties to even) in `dtype`. torch's float64 to
    16-bit cast goes through float32, a double rounding that can miss by one step: the
    nearest of the cast and its two neighbours is taken instead."""
    r = x.to(dtype)
    cands = [torch.nextafter(r, torch.full_like(r, float("-inf"))), r,
             torch.nextafter(r, torch.full_like(r, float("inf")))]
    best, dist = r, (r.to(torch.float64) - x).abs()
    for c in (cands[0], cands[2]):
        d = (c.to(torch.float64) - x).abs()
        better = (d < dist) | ((d == dist) & _even(c) & ~_even(best))
        best, dist = torch.where(better, c, best), torch.where(better, d, dist)
    return best


def _median(values: torch.Tensor) -> float:
    """Median, the mean of the two middle values for an even count (suite.timing.quantile);
    NaN for none."""
    if values.numel() == 0:
        return float("nan")
    s = values.sort().values
    n = s.numel()
    return float(s[n // 2]) if n % 2 else float((s[n // 2 - 1] + s[n // 2]) / 2)


def case_stats(p: Mapping, inputs: CaseInputs, outputs: Mapping, golden: Mapping) -> dict:
    """The module docstring's statistics of one adamw item."""
    befores = tensor_list(inputs.tensors["params"])
    afters, exacts = tensor_list(outputs["params"]), tensor_list(golden["params"])
    if not len(befores) == len(afters) == len(exacts):
        raise ValueError(f"{len(befores)} parameters before, {len(afters)} after, "
                         f"{len(exacts)} in the golden")
    n = n_moving = n_swallowed = n_stays = 0
    ratios = []
    for before, after, exact in zip(befores, afters, exacts):
        dev = exact.device  # per tensor, on the golden's device: no list-sized copies
        b, a = before.reshape(-1).to(dev), after.reshape(-1).to(dev)
        e = exact.reshape(-1).to(torch.float64)
        b64, a64 = b.to(torch.float64), a.to(b.dtype).to(torch.float64)
        moves = e != b64
        n += e.numel()
        n_moving += int(moves.sum())
        n_swallowed += int((moves & (a64 == b64)).sum())
        n_stays += int((round_to(e, b.dtype) == b).sum())
        step = (e - b64).abs()
        big = step > spacing(b) / 2
        ratios.append((a64 - b64).abs()[big] / step[big])
    return {
        "swallowed_fraction": n_swallowed / n_moving if n_moving else float("nan"),
        "exact_unchanged_fraction": n_stays / n if n else float("nan"),
        "amplification": _median(torch.cat(ratios)) if ratios else float("nan"),
        "n_elements": n,
    }
