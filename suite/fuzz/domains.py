"""Drawing one parameter's value from its domain, boundary-biased.

Integers come mostly from the values where kernels break: 1 and the range's ends, powers
of two and their neighbours (2^k - 1, 2^k, 2^k + 1), multiples of 8, 16, 32, 64 and 128
plus or minus 1..8 (vector widths and tiles), small primes; sometimes log-uniform or
uniform. Floats: the domain's special values half of the time, else uniform or
log-uniform in the range, rounded to 3 significant digits (readable ids). Strings: one
of the choices (the default a third of the time); bools: either value.
"""

from __future__ import annotations

import math
import random
from typing import Any, Optional

from bwd_suite.suite.params import FloatRange, IntList, IntRange, Param

SMALL_PRIMES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67,
                71, 73, 79, 83, 89, 97, 101, 103, 107, 109, 113, 127, 131)
MULTIPLES = (8, 16, 32, 64, 128)
_TRIES = 32  # redraws of a strategy that fell outside the range
# a str parameter draws its default this often (else any choice): the plain case stays
# common next to a long list of special patterns
DEFAULT_SHARE = 1 / 3


def boundary_values(low: int, high: int) -> list[int]:
    """The boundary set of low..high that sampling favours (sorted, in range): 1, the
    ends and their neighbours, powers of two and their neighbours, small primes, and the
    multiples of 8..128 plus or minus 1..8 up to 1024."""
    out = {1, low, low + 1, high - 1, high}
    k = 1
    while k <= high + 1:
        out.update((k - 1, k, k + 1))
        k *= 2
    out.update(SMALL_PRIMES)
    for m in MULTIPLES:
        for j in range(m, min(high, 1024) + 9, m):
            out.update(j + d for d in range(-8, 9))
    return sorted(v for v in out if low <= v <= high)


def _log_uniform(rng: random.Random, low: int, high: int) -> int:
    lo = max(1, low)
    if high <= lo:
        return high
    return int(round(math.exp(rng.uniform(math.log(lo), math.log(high + 1))) - 0.5))


def sample_int(rng: random.Random, low: int, high: int) -> int:
    """One integer of low..high, boundary-biased."""
    if low >= high:
        return low
    for _ in range(_TRIES):
        r = rng.random()
        if r < 0.10:
            v = rng.choice((low, low, high, high, low + 1, high - 1))
        elif r < 0.35:  # a power of two and its neighbours
            k = rng.randint(0, max(1, high.bit_length()))
            v = (1 << k) + rng.choice((-1, 0, 0, 1))
        elif r < 0.60:  # a multiple of a vector or tile width, plus or minus 1..8
            m = rng.choice(MULTIPLES)
            if high < m:
                continue
            j = _log_uniform(rng, 1, max(1, high // m))
            v = j * m + (0 if rng.random() < 0.25 else rng.choice((-1, 1)) * rng.randint(1, 8))
        elif r < 0.70:
            v = rng.choice(SMALL_PRIMES)
        elif r < 0.80:
            v = rng.randint(1, 16)
        elif r < 0.90:
            v = _log_uniform(rng, low, high)
        else:
            v = rng.randint(low, high)
        if low <= v <= high:
            return v
    return rng.randint(low, high)


def _round(v: float, digits: int = 3) -> float:
    if v == 0 or not math.isfinite(v):
        return v
    return float(f"{v:.{digits}g}")


def sample_float(rng: random.Random, d: FloatRange) -> float:
    """One float of the domain: a special value half of the time, else (log-)uniform."""
    for _ in range(_TRIES):
        r = rng.random()
        if d.special and r < 0.5:
            return rng.choice(d.special)
        if r < 0.75 or d.high <= 0:
            v = _round(rng.uniform(d.low, d.high))
        else:
            lo = max(d.low, d.high * 1e-6)
            v = _round(math.exp(rng.uniform(math.log(lo), math.log(d.high))))
        if v in d:
            return v
    return d.low


def domain_of(param: Param) -> Optional[Any]:
    """What the fuzzer draws `param` from: its declared domain, a str's choices or a
    bool's two values (as a tuple); None when it keeps its default."""
    if param.domain is not None:
        return param.domain
    if param.kind == "bool":
        return (False, True)
    if param.kind == "str" and param.choices:
        return tuple(param.choices)
    return None


def sample(param: Param, rng: random.Random, size: str, values: dict) -> Any:
    """A value of `param` under size profile `size`; `values` holds the parameters drawn
    so far (an IntList's `sum_below` refers to one of them)."""
    d = domain_of(param)
    if d is None:
        return values[param.name]
    if isinstance(d, tuple):
        if param.kind == "str" and rng.random() < DEFAULT_SHARE:
            return param.default
        return rng.choice(d)
    if isinstance(d, IntRange) and d.divides:
        return sample_divisor(rng, d, size, values[d.divides])
    if isinstance(d, IntRange):
        return sample_int(rng, d.low, max(d.low, d.high_for(size)))
    if isinstance(d, FloatRange):
        return sample_float(rng, d)
    if isinstance(d, IntList):
        return sample_list(rng, d, size, values)
    raise TypeError(f"param {param.name}: unknown domain {d!r}")


def sample_divisor(rng: random.Random, d: IntRange, size: str, n: int) -> int:
    """A divisor of n within the domain: the smallest, the largest or any, a third each
    (an independent draw is refused by the op most of the time)."""
    top = min(d.high_for(size), n)
    divisors = [k for k in range(max(1, d.low), top + 1) if n % k == 0] or [d.low]
    r = rng.random()
    return divisors[0] if r < 1 / 3 else divisors[-1] if r < 2 / 3 else rng.choice(divisors)


def sample_list(rng: random.Random, d: IntList, size: str, values: dict) -> list:
    """Empty half of the time, else 1..max_len elements; with `sum_below`, the elements
    leave room for at least one more step of that parameter."""
    if rng.random() < 0.5 or d.max_len < 1:
        return []
    n = rng.randint(1, d.max_len)
    el, out = d.element, []
    room = values[d.sum_below] - 1 if d.sum_below else None
    for i in range(n):
        high = el.high_for(size)
        if room is not None:
            high = min(high, room - el.low * (n - i - 1))
        if high < el.low:
            break
        v = sample_int(rng, el.low, high)
        out.append(v)
        if room is not None:
            room -= v
    return out
