"""Ours (kernels/linear/cuda.py) on a GPU, through the runner: it passes against the
float64 golden in both positions, saved and recomputed, transposed storages and an odd
shape, and reports which epilogue and algorithm each GEMM ran (impl_facts_json): the
derivative in DGELU / DRELU on the input, db in BGRAD on the wgrad GEMM; what cuBLASLt
has no epilogue for is unsupported with the reason. Skipped without CUDA."""

from __future__ import annotations

import json
from types import MappingProxyType

import pytest
import torch

from bwd_suite.suite import registry
from bwd_suite.suite.cases import Case
from bwd_suite.suite.roofline import Ceilings
from bwd_suite.suite.runner import CaseContext, RunOptions, run_item

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

SPEC = registry.op("linear")


def run(**kw):
    dev = torch.device("cuda")
    p = dict(SPEC.params.defaults(), m=384, n=256, k=128)
    p.update(kw)
    assert SPEC.check_case(p) is None, SPEC.check_case(p)
    case = Case(op="linear", group="gpu", id="linear/gpu/x", tags=frozenset({"gpu"}),
                params=MappingProxyType(p), seed=3, file="<test>")
    ceil = Ceilings(device_name="cuda", copy_gbps=None, copy_source="none", peak_tflops=None)
    opts = RunOptions(device=dev, golden_device=dev, repeats=3, timing=False)
    impl = next(i for i in registry.implementations("linear") if i.name == "cublaslt")
    return run_item(CaseContext(SPEC, case, opts), impl, None, ceil, {})


@pytest.mark.parametrize("kw, dgrad, wgrad, derivative", [
    (dict(activation="gelu", approximate="tanh", act_at="input"), "DGELU", "BGRADB", "epilogue"),
    (dict(activation="relu", act_at="input", dtype="float16"), "DRELU", "BGRADB", "epilogue"),
    (dict(activation="gelu", approximate="tanh", act_at="input", k=131), "DGELU", "BGRADB",
     "epilogue"),  # an aux ld padded to 136
    (dict(activation="gelu", dtype="float32"), "DEFAULT", "BGRADB", "elementwise"),
    (dict(activation="silu", recompute=True), "DEFAULT", "BGRADB", "elementwise"),
    (dict(activation="relu", act_at="input", recompute=True, w_t=True), "DRELU", "BGRADA",
     "epilogue"),
    (dict(bias=False, x_t=True, dy_t=True), "DEFAULT", "DEFAULT", "none"),
])
def test_ours_passes_and_says_which_epilogue_ran(kw, dgrad, wgrad, derivative):
    row = run(**kw)
    if row.verdict == "unsupported":  # the heuristic had no algorithm: said, not hidden
        assert "heuristic has no algorithm" in row.reason, row.reason
        return
    assert row.verdict == "pass", row.reason
    facts = json.loads(row.impl_facts_json)
    assert facts["dgrad_epilogue"] == dgrad and facts["wgrad_epilogue"] == wgrad, facts
    assert facts["derivative"] == derivative
    assert "dgrad_algo" in facts and "wgrad_split_k" in facts


@pytest.mark.parametrize("activation, approximate", [("gelu", "none"), ("silu", "none")])
def test_no_epilogue_for_the_erf_gelu_or_silu_on_the_input(activation, approximate):
    row = run(activation=activation, approximate=approximate, act_at="input")
    assert row.verdict == "unsupported" and "epilogue" in row.reason, row.reason


@pytest.mark.parametrize("kw, walk", [
    (dict(activation="gelu"), "16-byte packs"),
    # column-major dY and dZ: packs along m (no bias: cuBLASLt has no BGRADB algorithm for
    # this layout at these sizes on an H100)
    (dict(activation="gelu", dy_t=True, bias=False), "16-byte packs"),
    (dict(activation="gelu", dtype="float32", n=252), "16-byte packs"),  # 4 fp32 a pack
    (dict(activation="gelu", n=255), "scalar"),  # a row is not a whole number of packs
    (dict(activation="silu", m=383, dy_t=True, bias=False), "scalar"),  # nor is a column
])
def test_the_dz_kernel_moves_packs_where_every_operand_allows(kw, walk):
    row = run(**kw)
    if row.verdict == "unsupported":
        pytest.skip(f"cuBLASLt: {row.reason}")
    assert row.verdict == "pass", row.reason
    assert json.loads(row.impl_facts_json)["dact"] == f"elementwise kernel, {walk}"
