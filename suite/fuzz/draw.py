"""Whole cases drawn from an op's parameter domains, deterministic given the seed.

Every parameter with a domain is drawn (domains.py); the size axes first, in a random
order, each capped so that their product stays within the size profile's `max_numel`
(the later axes' minimums kept free). A combination the op's `check_case` refuses, one
outside the op's fuzz bounds on this device (`ParamSet.fuzz_bounds`: valid, but the data
degenerate or the yardstick is wrong by itself there), one the implementation does not
support (its `supports`, its devices, disabled), and one already drawn are skipped and
counted, without spending the budget; a refused or out-of-bounds one is then continued
with the blamed parameter at its default, unless that is a size axis, and an unsupported
one with a feature parameter at its default (`draw_cases`). Each case is an
ordinary `suite.cases.Case` of group "fuzz": id `op/fuzz/<param tokens>`, its seed
derived from the id by the case-file loader itself.
"""

from __future__ import annotations

import copy
import math
import random
from dataclasses import dataclass, field
from typing import Iterator, Mapping, Optional

from bwd_suite.suite import cases as cases_mod
from bwd_suite.suite.cases import Case
from bwd_suite.suite.fuzz.domains import sample, sample_int
from bwd_suite.suite.fuzz.sizes import SizeProfile
from bwd_suite.suite.params import IntRange

GROUP = "fuzz"  # the group (the "sweep name") of every drawn case
FILE = "fuzz"  # their case_file column
TAGS = ("fuzz",)


@dataclass
class DrawStats:
    drawn: int = 0  # cases handed out
    refused: int = 0  # combinations the op's check_case refuses
    ill_posed: int = 0  # valid, but outside the op's fuzz bounds on this device
    unsupported: int = 0  # outside the implementation's features or devices
    duplicate: int = 0  # the same case drawn again
    reasons: dict = field(default_factory=dict)  # refusal/unsupported reason -> count

    @property
    def skipped(self) -> int:
        return self.refused + self.ill_posed + self.unsupported + self.duplicate

    def note(self, reason: str) -> None:
        self.reasons[reason] = self.reasons.get(reason, 0) + 1

    def line(self) -> str:
        return (f"{self.drawn} cases drawn; skipped {self.skipped}: {self.refused} refused "
                f"by the op's check_case, {self.ill_posed} outside its fuzz bounds, "
                f"{self.unsupported} unsupported, "
                f"{self.duplicate} duplicates")


def axes(spec) -> list:
    """The op's size axes: parameters whose domain is an IntRange with axis=True."""
    return [p for p in spec.params.params
            if isinstance(p.domain, IntRange) and p.domain.axis]


def axis_product(spec, params: Mapping) -> int:
    return math.prod(params[p.name] for p in axes(spec))


def draw_params(spec, rng: random.Random, size: SizeProfile) -> dict:
    """One combination of parameter values (not yet checked against check_case)."""
    values = spec.params.defaults()
    order = axes(spec)
    rng.shuffle(order)
    product = 1
    for i, p in enumerate(order):
        rest = math.prod(q.domain.low for q in order[i + 1:])
        high = min(p.domain.high_for(size.name), size.max_numel // max(1, product * rest))
        values[p.name] = v = sample_int(rng, p.domain.low, max(p.domain.low, high))
        product *= v
    drawn = {p.name for p in order}
    for p in spec.params.params:
        if p.name not in drawn:
            values[p.name] = sample(p, rng, size.name, values)
    return values


def fuzz_case(spec, params: Mapping, tags=TAGS) -> Case:
    """The Case of these parameter values, built by the case-file loader (id
    `op/fuzz/<tokens>`, seed from the id), as a one-case [[case]] entry would be. The
    values must pass `check_case` (the loader raises SuiteInputError otherwise)."""
    entry = cases_mod._Entry(kind="case", name=GROUP, tags=frozenset(tags),
                             fixed=dict(params), swept={}, excludes=[], seed=None)
    (case,) = cases_mod._expand_entry(spec, FILE, entry, 0)
    return case


def out_of_bounds(spec, params: Mapping, device_type: str) -> Optional[tuple]:
    """(parameter, reason) when the op keeps this valid combination out of fuzzing on
    this device (`ParamSet.fuzz_bounds`: degenerate data, a yardstick wrong by itself)."""
    bounds = spec.params.fuzz_bounds
    return bounds(params, device_type) if bounds is not None else None


def refusal(spec, impl, params: Mapping, device_type: str) -> Optional[tuple]:
    """("refused" | "ill_posed" | "unsupported", reason) when the case is not to be run,
    else None."""
    for p in spec.params.params:
        err = p.check(params[p.name])
        if err:
            return "refused", f"{p.name}: {err}"
    bad = spec.check_case(params)
    if bad:
        return "refused", f"{bad[0]}: {bad[1]}"
    bad = out_of_bounds(spec, params, device_type)
    if bad:
        return "ill_posed", f"{bad[0]}: {bad[1]}"
    why = impl.unsupported_reason(params, device_type)
    if why:
        return "unsupported", why
    return None


def _feature(spec, params: Mapping, rng: random.Random, axis_names: set) -> str:
    """A parameter off its default, not a size axis, picked at random: the one reset when
    the implementation does not support a combination (its reason names no parameter)."""
    off = [p.name for p in spec.params.params
           if p.name not in axis_names and params[p.name] != p.default]
    return rng.choice(off) if off else ""


def draw_cases(spec, impl, device_type: str, seed: int, size: SizeProfile,
               stats: Optional[DrawStats] = None,
               max_attempts: Optional[int] = None) -> Iterator[Case]:
    """Cases the implementation can run, drawn with `random.Random(seed)`; endless (take
    what you need), unless `max_attempts` draws in a row are all skipped.

    A combination that check_case refuses, or that is outside the fuzz bounds, is
    skipped (counted in `refused`, `ill_posed`); the draw then goes on from it with the
    blamed parameter reset to its default (the refusals are mostly "has no effect
    without ..."), a new combination checked again like any other, once for each
    parameter at most; a blamed size axis is not reset (its default could break the
    size). One the implementation does not support goes on the same way with a feature
    parameter off its default, picked at random, reset (a pinned attention backend takes
    few of the features drawn together)."""
    rng = random.Random(seed)
    stats = stats if stats is not None else DrawStats()
    axis_names = {p.name for p in axes(spec)}
    seen: set = set()
    misses = 0
    while max_attempts is None or misses < max_attempts:
        params = draw_params(spec, rng, size)
        for _ in range(len(spec.params.params) + 1):
            bad = refusal(spec, impl, params, device_type)
            if not bad:
                break
            kind, reason = bad
            setattr(stats, kind, getattr(stats, kind) + 1)
            stats.note(reason)
            key = reason.split(":")[0] if kind != "unsupported" \
                else _feature(spec, params, rng, axis_names)
            # a size axis is not reset: its default could break the size profile
            if key not in spec.params.by_name \
                    or key in axis_names or params[key] == spec.params.by_name[key].default:
                break
            params = dict(params, **{key: copy.deepcopy(spec.params.by_name[key].default)})
        if bad:
            misses += 1
            continue
        case = fuzz_case(spec, params)
        if case.id in seen:
            stats.duplicate += 1
            misses += 1
            continue
        seen.add(case.id)
        misses = 0
        stats.drawn += 1
        yield case
