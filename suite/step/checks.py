"""The checks of a scenario, as data: the run each needs (a `Variant` of the plain step) and
how it is judged. One row per (scenario, implementation choice, check).

Variants that must not change the arithmetic (offload, checkpointing) are judged bitwise
against the plain run of the same choice where every backward is deterministic; variants
that change it (micro-batches, a chunked state), and those two where a backward is not bitwise
reproducible (the row says which), against the float64 model, under the plain run's bound.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional

from bwd_suite.suite.step.loop import Variant


class Judge(enum.Enum):
    FLOAT64 = "every loss, gradient, parameter and moment after every step against the " \
              "float64 model, under the grown bound"
    LOSS = "the loss after every step against the float64 model, under the grown bound"
    SAME = "bitwise equal to the plain run where every chosen backward is deterministic, " \
           "else against the float64 model"
    UNCHANGED = "the overflowed step leaves every parameter, master weight and moment " \
                "bitwise as it was, and reports the inf"


def _never(spec, p, checkpoint) -> Optional[str]:
    return None


def _always(spec, p, checkpoint) -> bool:
    return True


def _draws_refuse(spec, p, checkpoint) -> Optional[str]:
    if spec.draws(p):
        return ("the forward draws random numbers (dropout): micro-batches and chunks draw "
                "other masks than the whole batch, so the runs cannot agree")
    return None


def _chunked_refuse(spec, p, checkpoint) -> Optional[str]:
    if not spec.stateful:
        return f"model {spec.name} has no layer that carries state along the sequence"
    return _draws_refuse(spec, p, checkpoint)


@dataclass(frozen=True)
class Check:
    name: str
    doc: str
    judge: Judge
    # (params, checkpoint layers) -> the run it needs; None: the plain run itself
    variant: Callable[[Mapping, tuple], Optional[Variant]] = lambda p, c: None
    # why this check must fail (a declared expected failure); "" for a check that must pass
    expected_failure: str = ""
    # (model spec, params, checkpoint layers) -> why the check cannot apply, or None
    refuses: Callable = field(default=_never)
    # whether a scenario that lists no checks runs it
    default_on: Callable = field(default=_always)
    # the check whose eager run sizes the bound against the float64 model ("": its own):
    # a variant rounds differently from the plain step (micro-batches sum their gradients,
    # chunks their dweight), so the eager run of the same variant is its yardstick; a
    # declared bug is sized by the eager run of the correct variant
    yardstick: str = ""

    @property
    def yardstick_check(self) -> str:
        return self.yardstick or self.name


def _chunks(p: Mapping) -> tuple:
    return tuple(p["chunks"]) or (p["seq"] // 2,)


CHECKS = {c.name: c for c in (
    Check("float64", "the plain step against the float64 model", Judge.FLOAT64),
    Check("loss", "the loss over the steps against the float64 model", Judge.LOSS),
    Check("checkpoint", "activation checkpointing of the named layers against none",
          Judge.SAME, lambda p, c: Variant("checkpoint", checkpoint=frozenset(c))),
    Check("offload", "saved activations offloaded to the host, layout kept, against none",
          Judge.SAME, lambda p, c: Variant("offload", offload=True)),
    Check("accumulation", "k micro-batches, each loss summed over its tokens and divided by "
          "the whole batch's scored tokens, against the float64 model of one batch",
          Judge.FLOAT64, lambda p, c: Variant("accumulation", micro_batches=p["accumulation"]),
          refuses=_draws_refuse, default_on=lambda s, p, c: not s.draws(p)),
    Check("accumulation_mean", "k micro-batches, each its own mean divided by k (the 2024 "
          "gradient-accumulation bug), against the float64 model of one batch", Judge.FLOAT64,
          lambda p, c: Variant("accumulation_mean", micro_batches=p["accumulation"],
                               per_micro_batch_mean=True),
          expected_failure="each micro-batch's mean over its own tokens, summed and divided "
                           "by k, weighs the tokens of a short micro-batch more than the "
                           "whole batch's mean does (the 2024 gradient-accumulation bug): it "
                           "must fail against the global-token float64 model",
          refuses=_draws_refuse, default_on=lambda s, p, c: not s.draws(p),
          yardstick="accumulation"),
    Check("overflow", "a gradient overflowed to inf at overflow_step: the step is skipped",
          Judge.UNCHANGED, lambda p, c: Variant("overflow", overflow_step=p["overflow_step"])),
    Check("chunked_state", "the stateful layer run in chunks passing its state, against the "
          "float64 model of the whole sequence", Judge.FLOAT64,
          lambda p, c: Variant("chunked_state", chunks=_chunks(p)),
          refuses=_chunked_refuse,
          default_on=lambda s, p, c: s.stateful and not s.draws(p)),
)}
