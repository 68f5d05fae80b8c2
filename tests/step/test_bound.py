"""The step's bound (suite/tolerances.step_allowed): the ceiling grows with the steps and,
as sqrt, with the model's blocks; the bound proper (2 x the eager run's error) does not."""

import math

import torch

from bwd_suite.suite import tolerances
from bwd_suite.suite.opspec import TolClass

BF16 = torch.bfloat16


def _allowed(yardstick: float, step: int = 1, depth: int = 1) -> float:
    return tolerances.step_allowed(TolClass.REDUCTION, BF16, BF16, yardstick, step, depth=depth)


def test_the_ceiling_grows_as_sqrt_of_the_depth():
    one = _allowed(1.0)  # a yardstick far past the ceiling: the ceiling binds
    assert one == tolerances.ceiling(TolClass.REDUCTION, BF16, BF16)
    assert math.isclose(_allowed(1.0, depth=24), one * math.sqrt(24))
    assert math.isclose(_allowed(1.0, step=3, depth=4), one * 3 * 2)


def test_a_tight_yardstick_binds_whatever_the_depth():
    tight = _allowed(1e-3)
    assert tight < 0.02 and _allowed(1e-3, depth=24) == tight


def test_a_deep_models_eager_error_measured_on_the_h100_is_within_its_ceiling():
    # the eager bf16 step of 24 blocks was 0.064 of max|golden| from float64 at step 1
    assert _allowed(0.064, depth=24) > 0.064 > _allowed(0.064, depth=1)
