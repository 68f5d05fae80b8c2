"""Typed parameters of an op: the vocabulary that case files are written in.

Each op declares its parameters once (name, type, default, allowed values, and how the
value shows in a case id). The loader validates every case-file value against them, so a
typo or a wrong type is refused with the file and key named before anything runs.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

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

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"param {self.name}: kind {self.kind!r} not in {KINDS}")
        if self.choices is not None and self.kind != "str":
            raise ValueError(f"param {self.name}: choices are only for str params")
        if self.default is not None:
            err = self.check(self.default)
            if err:
                raise ValueError(f"param {self.name}: default {self.default!r}: {err}")

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

    def __post_init__(self):
        names = [p.name for p in self.params]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate parameter names in {names}")
        object.__setattr__(self, "by_name", {p.name: p for p in self.params})

    def defaults(self) -> dict:
        # copies: a case that changed a list default must not change every other case
        return {p.name: copy.deepcopy(p.default) for p in self.params}

    def case_id(self, values: dict) -> str:
        """Readable id such as B2-D256-L1-K4-bf16-cl-silu-init-final (param order)."""
        tokens = (p.token(values[p.name]) for p in self.params)
        return "-".join(t for t in tokens if t)
