"""The linear implementations' host-side pieces that need no GPU: ours (kernels/linear/
cuda.py) describes each case's storage to the plan as the op stores it, refuses what the
plan refuses, and lays the padded GELU aux out as cuBLASLt reads it; the vendor adapters
are registered disabled with the reason where their package does not import."""

from __future__ import annotations

import itertools

import pytest
import torch

from bwd_suite.kernels.linear import cuda as ours
from bwd_suite.kernels.linear import vendors
from bwd_suite.suite import registry

SPEC = registry.op("linear")
CPU = torch.device("cpu")


@pytest.mark.parametrize("x_t, w_t, dy_t", list(itertools.product((False, True), repeat=3)))
@pytest.mark.parametrize("m", [1, 9])
def test_the_problem_says_each_storage_as_the_op_made_it(x_t, w_t, dy_t, m):
    p = dict(SPEC.params.defaults(), m=m, n=5, k=7, x_t=x_t, w_t=w_t, dy_t=dy_t,
             activation="gelu", approximate="tanh", act_at="input", dtype="float16")
    inp = SPEC.make_inputs(p, 1, CPU)
    prob = ours.problem(**inp.tensors, **inp.attrs)
    assert prob[:7] == [m, 5, 7, 3, 1, 1, 0]
    # a single row is the same memory either way: the plan may take it as row-major
    assert prob[7:10] == [int(x_t and m > 1), int(w_t), int(dy_t and m > 1)]
    assert prob[10] == 2


def test_the_python_refusals_are_the_plans():
    for act, approx in (("gelu", "none"), ("silu", "none")):
        assert "epilogue" in ours.unsupported_reason(act, approx, "input")
        assert ours.unsupported_reason(act, approx, "output") is None
    assert ours.unsupported_reason("gelu", "tanh", "input") is None
    assert ours.unsupported_reason("relu", "none", "input") is None


@pytest.mark.parametrize("x_t", [False, True])
def test_the_padded_gelu_aux_holds_x_in_the_dgrad_orientation(x_t):
    p = dict(SPEC.params.defaults(), m=6, n=4, k=5, x_t=x_t, activation="gelu",
             approximate="tanh", act_at="input", dtype="float32")
    x = SPEC.make_inputs(p, 2, CPU).tensors["x"]
    rows, cols = (6, 5) if x_t else (5, 6)  # dgrad's D is dx, or dxᵀ for a row-major dx
    plan = {"aux": {"needed": True, "copy_of_x": False, "bitmask": False, "rows": rows,
                    "cols": cols, "ld": 8}}
    buf = ours._aux(plan, x, None, None).reshape(-1)
    colmajor = buf[:8 * cols].view(cols, 8)[:, :rows].t()  # element (i, j) at i + 8 j
    assert torch.equal(colmajor, x if x_t else x.t())


def test_vendor_adapters_are_disabled_with_the_reason_here():
    for name in ("apex_fused_dense", "te_linear"):
        impl = next(i for i in registry.implementations("linear") if i.name == name)
        if not impl.enabled:
            assert "not importable" in impl.disabled_reason, impl.disabled_reason
    apex = next(i for i in registry.implementations("linear") if i.name == "apex_fused_dense")
    p = dict(SPEC.params.defaults(), activation="gelu")
    assert "activation" in apex.supports(p)
    assert vendors.apex_supports(dict(SPEC.params.defaults())) is None
