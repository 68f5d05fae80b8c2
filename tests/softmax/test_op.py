"""The softmax op contract (ops/softmax.py) and its eager implementations through the
runner: case validation, the input factory, bytes and flops, and that the fused fp32
form is at least as accurate as PyTorch's native backward on bf16 dropout cases."""

from __future__ import annotations

from types import MappingProxyType

import pytest
import torch

from bwd_suite.ops import softmax as op
from bwd_suite.suite import registry
from bwd_suite.suite.cases import Case
from bwd_suite.suite.roofline import Ceilings
from bwd_suite.suite.runner import CaseContext, RunOptions, run_item

SPEC = registry.op("softmax")
CPU = torch.device("cpu")
CEIL = Ceilings(device_name="cpu", copy_gbps=None, copy_source="none", peak_tflops=None)


def params(**kw) -> dict:
    return dict(SPEC.params.defaults(), **kw)


def make_case(seed=1234, **kw) -> Case:
    return Case(op="softmax", group="t", id="softmax/t/x", tags=frozenset({"ci"}),
                params=MappingProxyType(params(**kw)), seed=seed, file="<test>")


@pytest.mark.parametrize("bad, key", [
    (dict(p=0.1), "p"),                                  # p without dropout
    (dict(mask="all_kept"), "mask"),                     # a mask pattern without dropout
    (dict(dropout=True, p=1.0), "p"),                    # scale 1/(1-p) undefined
    (dict(dropout=True, p=1.5), "p"),
    (dict(dropout=True, p=0.1, mask="all_dropped_rows", rows=1), "mask"),
])
def test_impossible_combinations_are_refused(bad, key):
    found = SPEC.check_case(params(**bad))
    assert found is not None and found[0] == key, found


def test_valid_combinations_pass_check_case():
    assert SPEC.check_case(params()) is None
    assert SPEC.check_case(params(dropout=True)) is None  # p = 0: identity dropout
    assert SPEC.check_case(params(dropout=True, p=0.9, mask="all_dropped_rows")) is None


def test_case_ids_are_readable():
    assert SPEC.params.case_id(params(rows=3, length=2049, dtype="float16")) == "R3-N2049-fp16"
    assert SPEC.params.case_id(params(dropout=True, p=0.1, mask="all_dropped_rows",
                                      logit_scale=30.0)) == \
        "R64-N1000-bf16-drop-p0.1-mask-droprows-ls30.0"


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_inputs(dtype):
    p = params(rows=50, length=300, dtype=dtype, dropout=True, p=0.25)
    inputs = SPEC.make_inputs(p, seed=7, device=CPU)
    t = inputs.tensors
    dt = getattr(torch, dtype)
    assert set(t) == {"y", "dy", "mask"}
    assert t["y"].dtype == t["dy"].dtype == dt and t["mask"].dtype == torch.bool
    assert t["y"].shape == t["dy"].shape == t["mask"].shape == (50, 300)
    assert t["y"].is_contiguous() and t["dy"].is_contiguous()
    assert (t["y"] >= 0).all()
    sums = t["y"].double().sum(-1)
    assert (sums - 1).abs().max() <= 300 * torch.finfo(dt).eps
    assert (t["dy"] != 0).float().mean() > 0.99
    kept = t["mask"].double().mean().item()
    assert abs(kept - 0.75) < 0.02  # P(keep) = 1 - p
    assert inputs.attrs == {"scale": 1 / 0.75}
    again = SPEC.make_inputs(p, seed=7, device=CPU).tensors  # seeded
    assert all(torch.equal(t[k], again[k]) for k in t)


def test_inputs_without_dropout_and_patterns():
    inputs = SPEC.make_inputs(params(rows=4, length=8), seed=1, device=CPU)
    assert inputs.tensors["mask"] is None and inputs.attrs == {"scale": None}
    kept = SPEC.make_inputs(params(rows=4, length=8, dropout=True, p=0.5, mask="all_kept"),
                            seed=1, device=CPU).tensors["mask"]
    assert kept.all()
    nodrop = SPEC.make_inputs(params(rows=4, length=64, dropout=True, p=0.0), seed=1,
                              device=CPU).tensors["mask"]
    assert nodrop.all()  # p = 0 keeps everything
    big = SPEC.make_inputs(params(rows=4, length=64, logit_scale=30.0), seed=1,
                           device=CPU).tensors["y"]
    assert (big.float().max(-1).values > 0.5).all()  # near one-hot


def test_bytes_and_flops():
    p = params(rows=16384, length=4096, dtype="bfloat16")
    n = 16384 * 4096
    assert SPEC.bytes(p) == 3 * n * 2
    assert SPEC.bytes(dict(p, dtype="float32", dropout=True, p=0.1)) == 3 * n * 4 + n
    assert SPEC.flops(p) == 4 * n and SPEC.flops(dict(p, dropout=True)) == 6 * n


def test_keep_threshold():
    assert op.keep_threshold(0.0) == float("-inf")
    assert op.keep_threshold(0.5) == pytest.approx(0.0, abs=1e-12)
    assert op.keep_threshold(0.1) == pytest.approx(-1.2815515655, abs=1e-9)


# ---------------------------------------------------------------- through the runner

def _rows(case):
    opts = RunOptions(device=CPU, golden_device=CPU, repeats=2, timing=False)
    ctx = CaseContext(SPEC, case, opts)
    impls = {i.name: i for i in registry.implementations("softmax")}
    return {name: run_item(ctx, impls[name], None, CEIL, impls)
            for name in ("torch_ref", "torch_fused_fp32")}


@pytest.mark.parametrize("mask", ["random", "all_kept"])
def test_fused_fp32_is_at_least_as_accurate_as_native_in_bf16(mask):
    """bf16 with dropout: torch_ref rounds g = dy * mask * scale to bf16 before the
    softmax backward; the fused form keeps g in fp32 and rounds once."""
    rows = _rows(make_case(rows=64, length=1000, dtype="bfloat16", dropout=True, p=0.1,
                           mask=mask))
    for name, row in rows.items():
        assert row.verdict == "pass", (name, row.reason)
        assert row.determinism == "bitwise", name
    ref, fused = (rows[n].outputs[0] for n in ("torch_ref", "torch_fused_fp32"))
    assert ref["name"] == fused["name"] == "dx"
    assert fused["err"] <= ref["err"], (fused["err"], ref["err"])
    assert fused["rel_l2"] < ref["rel_l2"], (fused["rel_l2"], ref["rel_l2"])
    # bf16 output rounding is half an ulp of the largest element at worst
    assert fused["err"] <= 2.0 ** -8


def test_both_pass_without_dropout_in_fp16():
    rows = _rows(make_case(rows=5, length=2049, dtype="float16", logit_scale=10.0))
    for name, row in rows.items():
        assert row.verdict == "pass", (name, row.reason)
        assert row.bytes == 3 * 5 * 2049 * 2
