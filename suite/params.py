"""Typed parameters of an op: the vocabulary that case files are written in.

Each op declares its parameters once (name, type, default, allowed values, and how the
value shows in a case id). The loader validates every case-file value against them, so a
typo or a wrong type is refused with the file and key named before anything runs.

A parameter may also declare its domain, the values `python -m bwd_suite fuzz` draws from
(suite/fuzz/): `IntRange` for an int (optionally a size axis, and capped per size
profile), `FloatRange` for a float (a range and its special values), `IntList` for an
int_list. A str parameter's domain is its choices, a bool's both values; a parameter
without one keeps its default when fuzzed.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

# The value kinds a case file can hold. Lists of ints are for things like chunk lengths.
KINDS = ("int", "float", "bool", "str", "int_list")
# TOML integers are Python ints of any size; every integer must fit the int64 columns and
# tensor shapes it ends up in.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _too_wide(value: Any) -> bool:
    """An integer (not a bool) outside the 64-bit range."""
    return isinstance(value, int) and not isinstance(value, bool) and \
        not INT64_MIN <= value <= INT64_MAX


def _shown(value: int) -> str:
    """An integer for a one-line message: a huge one by its size, not hundreds of digits."""
    return str(value) if abs(value) < 10**30 else f"an integer of {value.bit_length()} bits"


def _caps(caps) -> tuple:
    """Size-profile caps as sorted (profile, highest value) pairs (hashable, comparable)."""
    pairs = tuple(sorted(dict(caps).items()))
    for name, cap in pairs:
        if not isinstance(name, str) or isinstance(cap, bool) or not isinstance(cap, int):
            raise ValueError(f"caps: expected {{profile: int}}, got {name!r}: {cap!r}")
    return pairs


@dataclass(frozen=True)
class IntRange:
    """The integers low..high (both included) that a fuzzer draws for an int parameter
    (or each element of an int_list). `axis`: a size axis of the inputs, whose product
    over a case's axes is capped by the size profile (suite/fuzz/sizes.py). `caps`:
    {size profile: the highest value drawn under it}, e.g. {"small": 16}."""

    low: int
    high: int
    axis: bool = False
    caps: tuple = ()
    # another parameter (drawn before this one: a size axis) that the drawn value must
    # divide, e.g. key/value heads of the query heads; the fuzzer draws among its divisors
    divides: str = ""

    def __post_init__(self):
        for v in (self.low, self.high):
            if isinstance(v, bool) or not isinstance(v, int) or _too_wide(v):
                raise ValueError(f"IntRange: bounds must be 64-bit integers, got {v!r}")
        if self.low > self.high:
            raise ValueError(f"IntRange: low {self.low} above high {self.high}")
        object.__setattr__(self, "caps", _caps(self.caps))

    def high_for(self, size: str) -> int:
        """The highest value drawn under size profile `size`."""
        return min(self.high, dict(self.caps).get(size, self.high))

    def __contains__(self, value) -> bool:
        return self.low <= value <= self.high


@dataclass(frozen=True)
class FloatRange:
    """The floats a fuzzer draws for a float parameter: `special` values (drawn often;
    0, 1, the extremes that matter to the op) and the range low..high (high excluded with
    `high_open`)."""

    low: float
    high: float
    special: tuple = ()
    high_open: bool = False

    def __post_init__(self):
        if not (math.isfinite(self.low) and math.isfinite(self.high)) or self.low > self.high:
            raise ValueError(f"FloatRange: need finite low <= high, got {self.low}, {self.high}")
        object.__setattr__(self, "special", tuple(float(v) for v in self.special))
        bad = [v for v in self.special if v not in self]
        if bad:
            raise ValueError(f"FloatRange: special values {bad} outside the range")

    def __contains__(self, value) -> bool:
        return self.low <= value and (value < self.high if self.high_open
                                      else value <= self.high)


@dataclass(frozen=True)
class IntList:
    """The lists a fuzzer draws for an int_list parameter: up to `max_len` elements from
    `element`; with `sum_below`, the elements sum to less than that (earlier) parameter's
    value (chunk lengths inside a sequence length)."""

    element: IntRange
    max_len: int = 3
    sum_below: str = ""


@dataclass(frozen=True)
class Param:
    name: str
    kind: str
    default: Any
    doc: str
    # allowed values for kind "str" (None: any string)
    choices: Optional[tuple] = None
    # smallest allowed value for numeric kinds (each element for int_list)
    minimum: Optional[float] = None
    # value -> token in the readable case id; returning "" leaves the parameter out
    id_token: Optional[Callable[[Any], str]] = None
    # the values a fuzzer draws (IntRange, FloatRange or IntList, by kind); None: str and
    # bool params draw their choices, other params keep their default
    domain: Optional[object] = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"param {self.name}: kind {self.kind!r} not in {KINDS}")
        if self.choices is not None and self.kind != "str":
            raise ValueError(f"param {self.name}: choices are only for str params")
        self._check_domain()
        if self.default is not None:
            err = self.check(self.default)
            if err:
                raise ValueError(f"param {self.name}: default {self.default!r}: {err}")

    def _check_domain(self) -> None:
        d = self.domain
        if d is None:
            return
        want = {"int": IntRange, "float": FloatRange, "int_list": IntList}.get(self.kind)
        if want is None or not isinstance(d, want):
            raise ValueError(f"param {self.name}: a {self.kind} parameter takes "
                             + (f"a {want.__name__} domain" if want else
                                "no domain (its values are its choices)"))
        rng = d.element if isinstance(d, IntList) else d
        if self.minimum is not None and rng.low < self.minimum:
            raise ValueError(f"param {self.name}: domain starts at {rng.low}, below the "
                             f"minimum {self.minimum}")
        if self.kind in ("int", "float") and self.default is not None \
                and self.default not in d:
            raise ValueError(f"param {self.name}: default {self.default!r} outside its domain")

    def check(self, value: Any) -> Optional[str]:
        """Why `value` is not valid for this parameter, or None when it is."""
        k = self.kind
        if k == "int" and (isinstance(value, bool) or not isinstance(value, int)):
            return f"expected an integer, got {value!r}"
        if k in ("int", "float") and _too_wide(value):
            return f"{_shown(value)} does not fit a 64-bit integer"
        if k == "float" and (isinstance(value, bool) or not isinstance(value, (int, float))
                             or not math.isfinite(value)):
            return f"expected a finite number, got {value!r}"
        if k == "bool" and not isinstance(value, bool):
            return f"expected true or false, got {value!r}"
        if k == "str":
            if not isinstance(value, str):
                return f"expected a string, got {value!r}"
            if self.choices is not None and value not in self.choices:
                return f"{value!r} is not one of {', '.join(map(str, self.choices))}"
        if k == "int_list":
            if not isinstance(value, list) or any(
                isinstance(v, bool) or not isinstance(v, int) for v in value
            ):
                return f"expected a list of integers, got {value!r}"
            wide = next((v for v in value if _too_wide(v)), None)
            if wide is not None:
                return f"element {_shown(wide)} does not fit a 64-bit integer"
        if self.minimum is not None and k in ("int", "float"):
            if value < self.minimum:
                return f"{value!r} is below the minimum {self.minimum}"
        if self.minimum is not None and k == "int_list":
            if any(v < self.minimum for v in value):
                return f"{value!r} has an element below the minimum {self.minimum}"
        return None

    def token(self, value: Any) -> str:
        if self.id_token is not None:
            return self.id_token(value)
        if self.kind == "bool":
            return self.name if value else ""
        if self.kind == "int_list":
            return f"{self.name}{'.'.join(map(str, value))}" if value else ""
        return f"{self.name}{value}"


@dataclass(frozen=True)
class ParamSet:
    """The ordered parameters of one op, with lookup by name."""

    params: tuple
    by_name: dict = field(init=False, repr=False, compare=False)
    # (params, device type) -> (parameter, reason) for a valid combination the fuzzer
    # must not draw: one where the data degenerate or the yardstick on that device is
    # known to be wrong by itself (case files may still hold it); None: draw everything
    fuzz_bounds: Optional[Callable[[Mapping, str], Optional[tuple]]] = field(
        default=None, repr=False, compare=False)
    # params -> other parameter dicts describing the same case (inputs of the same values
    # in the same order, as make_inputs builds them), for the shrinker: a named preset
    # spelled as the explicit list it stands for, which one-parameter moves can shorten
    rewrites: Optional[Callable[[Mapping], list]] = field(
        default=None, repr=False, compare=False)

    def __post_init__(self):
        names = [p.name for p in self.params]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate parameter names in {names}")
        object.__setattr__(self, "by_name", {p.name: p for p in self.params})

    def no_effect(self, values: Mapping, name: str, without: str) -> Optional[tuple]:
        """(name, "has no effect <without>") when `name` is set off its default, for an
        op's check_case to refuse a key that would do nothing (else None)."""
        if values[name] != self.by_name[name].default:
            return name, f"has no effect {without}"
        return None

    def defaults(self) -> dict:
        # copies: a case that changed a list default must not change every other case
        return {p.name: copy.deepcopy(p.default) for p in self.params}

    def case_id(self, values: dict) -> str:
        """Readable id such as B2-D256-L1-K4-bf16-cl-silu-init-final (param order)."""
        tokens = (p.token(values[p.name]) for p in self.params)
        return "-".join(t for t in tokens if t)


def token_unless_default(name: str, default) -> Callable[[Any], str]:
    """An id_token: `name` + value (floats by repr), left out at the default."""
    return lambda v: "" if v == default else f"{name}{v!r}" if isinstance(v, float) \
        else f"{name}{v}"


def upstream_params(grad: str, mean_why: str, corr_of: str, peak_at: str) -> tuple:
    """The three input-distribution parameters of an upstream gradient `grad` (dy, dout):
    {grad}_mean a, {grad}_corr b and {grad}_peak in grad = a + b * y' + N(0, 1) (+ peak at
    the last element), y' the forward output standardized along the reduced axis
    (suite.inputs.upstream). Ids show them as e.g. dym1.0 (dy) or dom1.0 (dout)."""
    tag = grad[:2]

    def token(letter):
        return lambda v: "" if v == 0 else f"{tag}{letter}{float(v)!r}"

    form = f"{grad} = a + b*y' + N(0, 1)"
    return (
        Param(f"{grad}_mean", "float", 0.0, f"a in {form}: {mean_why}", id_token=token("m"),
              domain=FloatRange(-10.0, 10.0, special=(0.0, 1.0, -1.0, 10.0))),
        Param(f"{grad}_corr", "float", 0.0, f"b in {form}, y' {corr_of}", id_token=token("c"),
              domain=FloatRange(-4.0, 4.0, special=(0.0, 1.0, -1.0, 4.0))),
        Param(f"{grad}_peak", "float", 0.0, f"added to {grad} at {peak_at}",
              id_token=token("p"),
              domain=FloatRange(-100.0, 100.0, special=(0.0, 10.0, -10.0, 100.0))),
    )
