"""The checked hypotheses ops/linear_diagnosis.py added for bugs written apart from the
zoo (issue 41): each names its cause from the residual of its fit alone. Each test plants
the bug here, on top of the float64 golden (so nothing but the bug is wrong), runs the
item as `run` does, and checks the item's cause."""

from __future__ import annotations

from types import MappingProxyType

import pytest
import torch

from bwd_suite.golden import linear as golden
from bwd_suite.suite import registry
from bwd_suite.suite.cases import Case
from bwd_suite.suite.registry import Implementation
from bwd_suite.suite.roofline import Ceilings
from bwd_suite.suite.runner import CaseContext, RunOptions, run_item
from tests.golden_support import one_thread  # noqa: F401 - fixture

SPEC = registry.op("linear")
CPU = torch.device("cpu")
F64 = torch.float64
CEIL = Ceilings(device_name="cpu", copy_gbps=None, copy_source="none", peak_tflops=None)
OPTS = RunOptions(device=CPU, golden_device=CPU, repeats=1, timing=False)


def _gold(x, w, dy, bias, z, a, activation, approximate, act_at, **over):
    kw = dict(bias=bias, z=z, a=a, activation=activation, approximate=approximate,
              act_at=act_at, has_bias=bias is not None)
    kw.update(over)
    return golden.backward(x, w, dy, **kw)


def run(bug, seed=3, **kw):
    """The item of a case (m 37, n 45, k 29 unless `kw` says) for an implementation that
    writes the golden with `bug(inputs, golden)` applied to it."""
    def fn(*, out, **inp):
        got = bug(inp, _gold(**inp))
        for name, v in got.items():
            out[name].copy_(v)

    p = dict(SPEC.params.defaults(), m=37, n=45, k=29, dtype="float32")
    p.update(kw)
    case = Case(op="linear", group="t", id="linear/t/x", tags=frozenset({"ci"}),
                params=MappingProxyType(p), seed=seed, file="<test>")
    impl = Implementation(op="linear", name="planted", fn=fn, kind="external",
                          deterministic=False)
    return run_item(CaseContext(SPEC, case, OPTS), impl, None, CEIL, {})


def test_the_golden_itself_passes():
    assert run(lambda inp, g: g, activation="gelu", w_t=True).verdict == "pass"


def test_db_as_the_sum_of_dy_after_the_gemm():
    def bug(inp, g):
        return dict(g, db=inp["dy"].double().sum(0))
    row = run(bug, activation="gelu", bias=True)
    assert row.verdict == "fail" and row.diagnosis_cause == "db_no_derivative", row.diagnosis


def test_z_recomputed_without_the_bias():
    def bug(inp, g):
        x, w = inp["x"].double(), inp["w"].double()
        return _gold(**dict(inp, z=x @ w.t()))
    row = run(bug, activation="silu", recompute=True, bias=True)
    assert row.verdict == "fail"
    assert row.diagnosis_cause == "preactivation_without_bias", row.diagnosis


@pytest.mark.parametrize("name", ["x", "w", "dy"])
def test_a_transposed_input_read_as_row_major(name):
    def bug(inp, g):
        v = inp[name]
        # the storage of a column-major v, walked as a row-major matrix of v's shape
        misread = torch.as_strided(v, v.shape, (v.shape[1], 1)).double()
        return _gold(**dict(inp, **{name: misread}))
    row = run(bug, activation="gelu", approximate="tanh", **{f"{name}_t": True})
    assert row.verdict == "fail" and row.diagnosis_cause == "stride", row.diagnosis


def test_dw_and_db_without_the_rows_past_the_last_tile():
    def bug(inp, g):
        kept = dict(inp, x=inp["x"][:32], dy=inp["dy"][:32],
                    z=inp["z"][:32] if inp["z"] is not None else None)
        head = _gold(**kept)
        return dict(g, dw=head["dw"], db=head["db"])
    row = run(bug, activation="gelu", bias=True)  # M = 37: 5 rows past 32
    assert row.verdict == "fail" and row.diagnosis_cause == "remainder", row.diagnosis


@pytest.mark.parametrize("rows", [16, 64])
def test_dw_accumulated_in_16_bits(rows):
    def bug(inp, g):
        dy, x = inp["dy"].double(), inp["x"].double()
        acc = torch.zeros(1, 1, dtype=torch.bfloat16)
        for r in range(0, dy.shape[0], rows):
            acc = (acc.double() + dy[r:r + rows].t() @ x[r:r + rows]).bfloat16()
        return dict(g, dw=acc.double())
    # the ci case long-dw-sum: a sum of 1419 products that cancels to 0.84
    row = run(bug, seed=1317669176, m=1419, n=1, k=1, bias=False, dtype="bfloat16")
    assert row.verdict == "fail" and row.diagnosis_cause == "precision", row.diagnosis


def test_a_scale_is_named_on_larger_outputs_only():
    def bug(inp, g):
        return dict(g, dw=1.5 * g["dw"])
    assert run(bug).diagnosis_cause == "grad_scaled"
    row = run(bug, m=5, n=1, k=1)  # dw of one element: any error is some multiple of it
    assert row.verdict == "fail" and row.diagnosis_cause != "grad_scaled", row.diagnosis
