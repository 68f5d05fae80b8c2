"""The adamw statistics (ops/adamw_stats.py, swallowed updates) on tensors whose answers
are worked out by hand, and stats_json of a run item (OpSpec.case_stats)."""

import dataclasses
import json
import math
from types import MappingProxyType

import pytest
import torch

from bwd_suite.kernels.adamw.torch_ref import torch_ref
from bwd_suite.ops import adamw_stats
from bwd_suite.suite import registry
from bwd_suite.suite.cases import Case
from bwd_suite.suite.opspec import CaseInputs
from bwd_suite.suite.outcomes import Verdict
from bwd_suite.suite.registry import Implementation
from bwd_suite.suite.roofline import Ceilings
from bwd_suite.suite.runner import CaseContext, RunOptions, run_item

SPEC = registry.op("adamw")
BF16, F64 = torch.bfloat16, torch.float64
S1 = 2.0 ** -7  # bf16 spacing above 1 (8 significant bits)


def stats(before, after, exact):
    """case_stats of parameter lists given as lists of values (bf16, bf16, float64)."""
    b = [torch.tensor(x, dtype=BF16) for x in before]
    a = [torch.tensor(x, dtype=BF16) for x in after]
    e = [torch.tensor(x, dtype=F64) for x in exact]
    return adamw_stats.case_stats({}, CaseInputs(tensors={"params": b}, attrs={}),
                                  {"params": a}, {"params": e})


def test_an_update_far_below_the_spacing_is_swallowed_and_should_be():
    got = stats([[1.0] * 4], [[1.0] * 4], [[1.0 - 1e-4] * 4])
    assert got["swallowed_fraction"] == 1.0
    assert got["exact_unchanged_fraction"] == 1.0  # 1 - 1e-4 rounds to 1 in bf16
    assert math.isnan(got["amplification"])  # no update could move the value
    assert got["n_elements"] == 4


def test_three_quarters_of_a_spacing_moves_one_spacing():
    got = stats([[1.0]], [[1.0 + S1]], [[1.0 + 0.75 * S1]])
    assert got["swallowed_fraction"] == 0.0
    assert got["exact_unchanged_fraction"] == 0.0
    assert got["amplification"] == pytest.approx(4 / 3)


def test_over_every_tensor_of_the_list():
    # tensor 1: an element the exact step leaves alone (not in the swallowed count) and one
    # swallowed; tensor 2 at 2 (spacing 2^-6): one moved a spacing for 3/4 of one, one
    # moved right by two spacings (amplification 1); median of (4/3, 1)
    got = stats([[1.0, 1.0], [2.0, 2.0]], [[1.0, 1.0], [2.0 + 2 ** -6, 2.0 + 2 ** -5]],
                [[1.0, 1.0 + 1e-4], [2.0 + 0.75 * 2 ** -6, 2.0 + 2 ** -5]])
    assert got["swallowed_fraction"] == pytest.approx(1 / 3)
    assert got["exact_unchanged_fraction"] == pytest.approx(2 / 4)
    assert got["amplification"] == pytest.approx((4 / 3 + 1) / 2)
    assert got["n_elements"] == 4


def test_spacing_is_toward_plus_infinity():
    s = adamw_stats.spacing(torch.tensor([1.0, -1.0, 2.0], dtype=BF16))
    assert s.dtype == F64 and s.tolist() == [S1, S1 / 2, 2 * S1]


def test_rounding_is_once_to_nearest_ties_to_even():
    # just above the midpoint of 1 and 1 + 2^-7: nearest is up, but the cast through fp32
    # lands on the midpoint and ties down to 1
    x = torch.tensor([1 + 2 ** -8 + 2 ** -30, 1 + 2 ** -8, 1 + 3 * 2 ** -8], dtype=F64)
    assert x[:1].to(BF16).item() == 1.0  # torch's double rounding
    assert adamw_stats.round_to(x, BF16).tolist() == [1 + S1, 1.0, 1 + 2 * S1]
    assert adamw_stats.round_to(x, torch.float32).tolist() == x.to(torch.float32).tolist()


CPU = torch.device("cpu")
CEIL = Ceilings(device_name="cpu", copy_gbps=None, copy_source="none", peak_tflops=None)


def run(spec, fn=torch_ref, **overrides):
    params = dict(spec.params.defaults(), sizes=[300, 41], **overrides)
    case = Case(op="adamw", group="t", id="adamw/t/x", tags=frozenset({"ci"}),
                params=MappingProxyType(params), seed=7, file="<test>")
    opts = RunOptions(device=CPU, golden_device=CPU, repeats=2, timing=False)
    return run_item(CaseContext(spec, case, opts),
                    Implementation(op="adamw", name="torch_ref", fn=fn, kind="native"),
                    None, CEIL, {})


def test_a_bf16_step_at_lr_1e_5_is_swallowed_and_recorded():
    row = run(SPEC, dtype="bfloat16", lr=1e-5)
    assert row.verdict is Verdict.PASS, row.reason
    got = json.loads(row.stats_json)
    assert got["swallowed_fraction"] > 0.9 and got["n_elements"] == 341
    assert "amplification" not in got or math.isfinite(got["amplification"])


def test_stats_of_a_failing_item_and_a_failing_hook():
    def no_update(*, params, **kw):  # leaves every tensor as it was: fails
        kw["out"]["found_inf"].fill_(0.0)
    row = run(SPEC, no_update, dtype="float32")
    assert row.verdict is Verdict.FAIL
    assert json.loads(row.stats_json)["swallowed_fraction"] == 1.0

    def broken(p, inputs, outputs, golden):
        raise KeyError("params")
    row = run(dataclasses.replace(SPEC, case_stats=broken), dtype="float32")
    assert row.verdict is Verdict.PASS, row.reason
    assert json.loads(row.stats_json) == {"error": "KeyError: 'params'"}

    def odd(p, inputs, outputs, golden):
        return {"nan": float("nan"), "inf": float("inf"), "n": 3, "t": torch.tensor(0.5)}
    row = run(dataclasses.replace(SPEC, case_stats=odd), dtype="float32")
    assert json.loads(row.stats_json) == {"n": 3, "t": 0.5}  # JSON holds no NaN


def test_no_stats_without_the_hook():
    row = run(dataclasses.replace(SPEC, case_stats=None), dtype="float32")
    assert row.stats_json is None
