"""Causes the period search can name for any op, and the rule builders ops use with
them: an op lists the generic causes it opts into (`generic_causes`) and rules from
GENERIC_RULES, often behind its own (`fallback`)."""

from __future__ import annotations

import enum
from dataclasses import replace
from typing import Callable, Mapping, Sequence

from bwd_suite.suite.diagnosis.axis_pattern import AxisPattern
from bwd_suite.suite.diagnosis.evidence import Evidence, Rule
from bwd_suite.suite.diagnosis.vocabulary import CauseSpec


class Generic(enum.Enum):
    """Causes the period search can name for any op (an op opts in by listing
    GENERIC_CAUSES, or some of them, and rules from GENERIC_RULES in its spec)."""

    REMAINDER = "remainder"
    TILE_OFFSET = "tile_offset"
    STRIDE = "stride"
    TILE_POSITION = "tile_position"
    FIRST_INDEX = "first_index"
    LAST_INDEX = "last_index"
    ONE_INDEX = "one_index"
    # from the item's failure kind and the size of its errors, not the period search
    INPUT_MODIFIED = "input_modified"
    NONDETERMINISTIC = "nondeterministic"
    PRECISION = "precision"


GENERIC_CAUSES = (
    CauseSpec(Generic.REMAINDER, "the partial tile past the last multiple of a tile size "
              "mishandled", "the remainder loop or the predication of the last, partial "
              "tile or vector: its bound, its mask, its offset"),
    CauseSpec(Generic.TILE_OFFSET, "per-tile offset wrong (every tile but the first)",
              "the base offset of each tile (tile index x tile size) in its loads and "
              "stores: tile 0 is right because its offset is 0"),
    CauseSpec(Generic.STRIDE, "stride or layout handling wrong (every slice but the first)",
              "the stride between consecutive rows or slices: a padded or rounded leading "
              "dimension, or a layout taken for contiguous"),
    CauseSpec(Generic.TILE_POSITION, "fixed positions within every tile wrong",
              "the indexing of lanes or rows inside a tile: the elements at these offsets "
              "share or skip some work"),
    CauseSpec(Generic.FIRST_INDEX, "the first element along an axis mishandled",
              "an off-by-one at the start of a loop, or a special case for index 0"),
    CauseSpec(Generic.LAST_INDEX, "the last element along an axis not handled (a bound "
              "off by one)", "loop and grid bounds: < n against < n - 1, the rounding of "
              "the grid size, the last block's early exit"),
    CauseSpec(Generic.ONE_INDEX, "a single index along an axis wrong",
              "that index's load, store or mask: an indexing special case"),
    CauseSpec(Generic.INPUT_MODIFIED, "an input written in place",
              "a temporary formed in an input's storage (x.mul_(...)) or an output aliased "
              "to an input: compute into the outputs or scratch of your own"),
    CauseSpec(Generic.NONDETERMINISTIC, "results that differ between calls",
              "atomics or a reduction whose order depends on scheduling: a fixed order, or "
              "register deterministic=False"),
    CauseSpec(Generic.PRECISION, "arithmetic in too little precision (a 16-bit accumulator "
              "or intermediate)", "accumulate and keep intermediates in fp32, round once "
              "at the store"),
)
# the normalized error up to which a wrong output no story explains reads as rounding
# (a formula, index or layout bug is off by a sizeable part of max|golden|)
PRECISION_ERR = 0.1


def generic_causes(**requires: Callable[[Mapping], bool]) -> tuple:
    """GENERIC_CAUSES with the features an op knows each needs: generic_causes(
    remainder=lambda f: f["partial_vector"]) (keys: Generic values)."""
    unknown = set(requires) - {g.value for g in Generic}
    if unknown:
        raise ValueError(f"not generic causes: {sorted(unknown)}")
    return tuple(replace(c, requires=requires[c.cause.value]) if c.cause.value in requires
                 else c for c in GENERIC_CAUSES)


def _any_pattern(test: Callable[[AxisPattern], bool]) -> Callable[[Evidence], bool]:
    return lambda e: any(test(p) for p in e.patterns())


def along_axis(output: str, axis,
               test: Callable[[AxisPattern], bool]) -> Callable[[Evidence], bool]:
    """A rule's test: `output` is wrong with a pattern along `axis` (noun or index) that
    passes `test`, e.g. along_axis("dx", "column", lambda p: p.past_multiple_of(8))."""
    def check(e: Evidence) -> bool:
        p = e.along(output, axis)
        return p is not None and test(p)
    return check


GENERIC_RULES = (
    Rule(Generic.REMAINDER, _any_pattern(lambda p: p.kind == "remainder")),
    Rule(Generic.TILE_OFFSET, _any_pattern(lambda p: p.kind == "after" and p.t >= 2)),
    Rule(Generic.STRIDE, _any_pattern(lambda p: p.kind == "after" and p.t == 1)),
    Rule(Generic.TILE_POSITION, _any_pattern(lambda p: p.kind == "period")),
    Rule(Generic.FIRST_INDEX, _any_pattern(lambda p: p.first)),
    Rule(Generic.LAST_INDEX, _any_pattern(lambda p: p.last)),
    Rule(Generic.ONE_INDEX, _any_pattern(
        lambda p: p.kind == "index" and not p.first and not p.last)),
)


# the failure kind says the cause itself: first in every table (hypotheses.ordered)
KIND_RULES = (
    Rule(Generic.INPUT_MODIFIED, lambda e: e.kind == "input modified"),
    Rule(Generic.NONDETERMINISTIC, lambda e: e.kind == "nondeterministic"),
)


def precision_rule(feature: str) -> Rule:
    """Every wrong output finite and off by at most PRECISION_ERR of max|golden|, in a
    case with `feature` (the op's 16-bit one): rounding, not a formula. For an op's rule
    table, after its checked hypotheses (a story that explains the error wins) and before
    the period search's causes (a few wrong elements of a rounding error form no tile)."""
    def holds(e: Evidence) -> bool:
        return bool(e.wrong) and bool(e.features.get(feature)) and all(
            e.finite(o) and e.errors.get(o, 1.0) <= PRECISION_ERR for o in e.wrong)
    return Rule(Generic.PRECISION, holds)


def fallback(rules: Sequence[Rule], extra: Sequence[Rule] = GENERIC_RULES) -> tuple:
    """`extra` rules that name their cause only when none of `rules` holds: for an op
    whose own rules should keep the word where they have one."""
    rules = tuple(rules)
    key = ("fallback", id(rules))

    def none_holds(e: Evidence) -> bool:
        memo = e.memo  # asked once per generic rule: the op's rules run once per item
        if key not in memo:
            memo[key] = not any(o.when(e) for o in rules)
        return memo[key]

    def only_if_none(r):
        return Rule(r.cause, lambda e: none_holds(e) and r.when(e))
    return tuple(only_if_none(r) for r in extra)

