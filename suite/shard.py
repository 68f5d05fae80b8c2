"""`--shard i/n`: one machine's part of a selection, for a CI matrix of n machines.

Shards are numbered 1 to n. The split is by case, so that a case's inputs and float64
golden are built on one machine only: the selected cases are sorted by (op, case id) and
dealt round-robin, the k-th to shard (k mod n) + 1. It depends on nothing but the
selection (not the process, PYTHONHASHSEED, the machine or the order the cases came in),
the n shards hold every case exactly once, and their case counts differ by at most one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, TypeVar

from bwd_suite.suite.errors import SuiteInputError

T = TypeVar("T")


@dataclass(frozen=True)
class Shard:
    index: int  # 1..count
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str, flag: str = "--shard") -> Shard:
    """`i/n` with 1 <= i <= n."""
    i, slash, n = text.strip().partition("/")
    if not (slash and i.strip().isdigit() and n.strip().isdigit()):
        raise SuiteInputError(flag, f"{text!r} is not i/n (shard i of n, from 1/n to n/n)")
    shard = Shard(int(i), int(n))
    if shard.count < 1:
        raise SuiteInputError(flag, f"{text!r}: n, the number of shards, must be at least 1")
    if not 1 <= shard.index <= shard.count:
        raise SuiteInputError(flag, f"{text!r}: the shards of {shard.count} are numbered "
                                    f"1/{shard.count} to {shard.count}/{shard.count}")
    return shard


def take(things: Iterable[T], key: Callable[[T], tuple], shard: Shard) -> list:
    """The things whose key falls to `shard`, in their given order. Things of one key go
    together (a case's items); keys are dealt round-robin in sorted order."""
    things = list(things)
    keys = sorted({key(t) for t in things})
    mine = {k for rank, k in enumerate(keys) if rank % shard.count == shard.index - 1}
    return [t for t in things if key(t) in mine]


def case_key(case) -> tuple:
    """What the split deals: a case, by (op, case id)."""
    return (case.op, case.id)


def split_plan(plan, shard: Shard, flag: str = "--shard"):
    """The plan's entries (cases with their implementations) of `shard`; a shard left
    without any case is bad input."""
    from bwd_suite.suite.plan import Plan

    entries = take(plan.entries, lambda e: case_key(e.case), shard)
    if not entries:
        raise SuiteInputError(flag, f"shard {shard} holds no case: the selection has "
                                    f"{plan.n_cases}, use at most {plan.n_cases} shards")
    return Plan(tuple(entries))
