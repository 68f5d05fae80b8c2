"""The mutant zoo: one module per op, each a model of a kernel with `Bug` switches and one
registered mutant per bug. This module holds what they share: the mutant record and its
registration as an implementation of kind "mutant" (runs skip them unless asked)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Callable

from bwd_suite.suite.registry import implementation


@dataclass(frozen=True)
class Mutant:
    name: str
    bug: enum.Enum
    cause: enum.Enum  # what the diagnosis must name
    symptom: str  # what the suite must see (the verdict it must get)


def register(op: str, m: Mutant, model: Callable) -> Callable:
    """Register `m` as an implementation of `op` that runs `model(m, **arguments)` (the
    op's model with m's bug switched on); its docstring carries the bug and the symptom,
    `planted_cause` the cause the diagnosis must name."""
    def fn(**kw):
        model(m, **kw)

    fn.__doc__ = f"{m.bug.value}. Symptom: {m.symptom}"
    fn.__name__ = m.name
    fn.planted_cause = m.cause.value
    fn.mutant = m
    implementation(op, m.name, kind="mutant", deterministic=True)(fn)
    return fn
