"""The linear op contract (ops/linear.py): bad case files (exit 2, one line naming file and
key), readable ids, the input factory (storages, the saved z and a, the relu gap), exact
flops and bytes, the epilogue's saved bytes, memory bounds, and the size-aware reduction
tolerance of its outputs."""

from __future__ import annotations

import pytest
import torch

from bwd_suite.golden import linear as golden
from bwd_suite.ops import linear as op
from bwd_suite.suite import registry, tolerances
from bwd_suite.suite.opspec import TolClass
from tests.bad_input import assert_one_line_naming_file_and_key

SPEC = registry.op("linear")
CPU = torch.device("cpu")


def params(**kw) -> dict:
    return dict(SPEC.params.defaults(), **kw)


@pytest.mark.parametrize("line, key, says", [
    ("k = 32\nw_shape = [16, 33]", "w_shape", "K of x and w disagree"),
    ("n = 16\ndy_shape = [8, 17]", "dy_shape", "N of w and dy disagree"),
    ("n = 16\nw_shape = [17, 32]", "w_shape", "N of w and dy disagree"),
    ("n = 16\nbias_shape = [15]", "bias_shape", "a bias of shape [15] for N = 16"),
    ('activation = "tanh"', "activation", "is not one of none, relu, gelu, silu"),
    ('act_at = "input"', "act_at", "has no effect without an activation"),
    ('approximate = "tanh"', "approximate", "has no effect without activation"),
    ("m = 0", "m", "below the minimum"),
], ids=["k-of-x-and-w", "n-of-dy", "n-of-w", "bias-length", "unknown-activation",
        "position-without-activation", "approximate-without-gelu", "no-rows"])
def test_bad_input_is_one_line_naming_file_and_key(tmp_path, capsys, line, key, says):
    assert_one_line_naming_file_and_key(
        tmp_path, capsys, f'op = "linear"\n[defaults]\nm = 8\nn = 16\nk = 32\n'
                          f'[[case]]\nname = "c"\ntags = ["ci"]\n{line}\n', key, says)


def test_shapes_that_agree_are_valid():
    ok = params(m=8, n=16, k=32, w_shape=[16, 32], dy_shape=[8, 16], bias_shape=[16])
    assert SPEC.check_case(ok) is None


def test_case_ids_are_readable():
    assert SPEC.params.case_id(params(m=8192, n=4096, k=4096, activation="gelu",
                                      approximate="tanh", act_at="input")) == \
        "M8192-N4096-K4096-bf16-bias-gelu-tanh-actin"
    assert SPEC.params.case_id(params(bias=False, activation="relu", recompute=True,
                                      x_t=True, dy_t=True, dtype="float32")) == \
        "M64-N64-K64-fp32-nobias-relu-recomp-xT-dyT"


@pytest.mark.parametrize("act_at", ["output", "input"])
def test_inputs_in_their_storage_with_what_the_forward_saved(act_at):
    p = params(m=9, n=5, k=7, activation="gelu", act_at=act_at, x_t=True, w_t=True,
               dtype="float16")
    inp = SPEC.make_inputs(p, 3, CPU)
    t = inp.tensors
    assert t["x"].shape == (9, 7) and t["x"].t().is_contiguous()
    assert t["w"].shape == (5, 7) and t["w"].t().is_contiguous()
    assert t["dy"].shape == (9, 5) and t["dy"].is_contiguous()
    assert all(v.dtype == torch.float16 for v in t.values() if v is not None)
    x, w, b = (t[n].double() for n in ("x", "w", "bias"))
    if act_at == "output":
        assert t["a"] is None
        assert torch.equal(t["z"], golden.preactivation(x, w, b).half())
        assert t["z"].stride() == t["dy"].stride()
    else:
        assert t["z"] is None
        assert torch.equal(t["a"], golden.act(x, "gelu").half())
        assert t["a"].stride() == t["x"].stride()
    out = SPEC.empty_outputs(inp, p)
    assert out["dx"].stride() == t["x"].stride() and out["dw"].stride() == t["w"].stride()
    assert out["db"].shape == (5,)
    again = SPEC.make_inputs(p, 3, CPU).tensors  # seeded
    assert all(torch.equal(t[n], again[n]) for n in ("x", "w", "dy", "bias"))


def test_recomputed_cases_carry_no_saved_tensor_and_relu_hides_its_kink():
    p = params(m=300, n=200, k=16, activation="relu", recompute=True, dtype="float32")
    t = SPEC.make_inputs(p, 1, CPU).tensors
    assert t["z"] is None and t["a"] is None
    z = golden.preactivation(t["x"].double(), t["w"].double(), t["bias"].double())
    near = z.abs() < op.RELU_GAP
    assert bool(near.any()) and bool((t["dy"][near] == 0).all())
    assert float((t["dy"] == 0).double().mean()) < 0.01


def test_flops_and_bytes_are_exact():
    M, N, K = 8192, 4096, 4096
    none = params(m=M, n=N, k=K, bias=False)
    assert SPEC.flops(none) == 4 * M * N * K
    assert SPEC.bytes(none) == 2 * (2 * M * K + 2 * N * K + M * N)
    tanh_in = params(m=M, n=N, k=K, activation="gelu", approximate="tanh", act_at="input")
    assert SPEC.flops(tanh_in) == 4 * M * N * K + 18 * M * K + M * N
    assert SPEC.bytes(tanh_in) == 2 * (2 * M * K + 2 * N * K + M * N + N + M * K)
    recomputed = params(m=M, n=N, k=K, activation="relu", recompute=True)
    assert SPEC.flops(recomputed) == 6 * M * N * K + M * N + M * N + M * N
    assert SPEC.bytes(recomputed) == 2 * (2 * M * K + 2 * N * K + M * N + 2 * N)


def test_the_epilogue_saves_the_dgrad_round_trip_and_the_second_read_of_dy():
    M, N, K = 64, 32, 16
    fused_in = params(m=M, n=N, k=K, activation="gelu", act_at="input")
    assert op.epilogue_saved_bytes(fused_in) == 2 * (M * N + 2 * M * K)
    after = params(m=M, n=N, k=K, activation="gelu", bias=False)
    assert op.epilogue_saved_bytes(after) == 0
    stats = SPEC.case_stats(fused_in, None, {}, {})
    assert stats["epilogue_saved_frac"] == pytest.approx(
        op.epilogue_saved_bytes(fused_in) / SPEC.bytes(fused_in))
    assert SPEC.memory_bounds(fused_in) == {"unfused": 2 * M * K, "fused": 0}
    assert SPEC.memory_bounds(after) == {"unfused": 2 * M * N, "fused": 2 * M * N}


def test_each_output_says_the_length_of_its_sum_and_long_sums_get_more_room():
    outs = {o.name: o for o in SPEC.outputs(params(m=16384, n=4096, k=128))}
    assert (outs["dx"].terms, outs["dw"].terms, outs["db"].terms) == (4096, 16384, 16384)
    assert all(o.tol_class is TolClass.REDUCTION for o in outs.values())
    f32 = torch.float32
    short = tolerances.allowed_error(TolClass.REDUCTION, f32, f32, 0.0, terms=64)
    unknown = tolerances.allowed_error(TolClass.REDUCTION, f32, f32, 0.0)
    long = tolerances.allowed_error(TolClass.REDUCTION, f32, f32, 0.0, terms=16384)
    eps = torch.finfo(f32).eps
    assert short == unknown  # 64 fp32 ulps cover sums up to 4096 terms
    assert long - unknown == pytest.approx((128 - 64) * eps, rel=1e-6)
