"""The adamw op's inputs, refusals (bad input: exit 2, one line naming file and key) and
the fused implementation's declared limits."""

import pytest
import torch

from bwd_suite.suite import registry
from tests.bad_input import assert_one_line_naming_file_and_key

SPEC = registry.op("adamw")
CPU = torch.device("cpu")


def params(**kw):
    return dict(SPEC.params.defaults(), **kw)


def test_inputs_are_lists_in_their_dtypes():
    t = SPEC.make_inputs(params(preset="mixed", dtype="bfloat16", master=True,
                                grad_dtype="float32", amsgrad=True, step=2), 5, CPU).tensors
    shapes = [tuple(x.shape) for x in t["params"]]
    assert shapes == [(4, 8), (8,), (3, 5, 7), (1,), (130,), (2, 1, 33)]
    for k in ("grads", "master", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"):
        assert [tuple(x.shape) for x in t[k]] == shapes, k
    assert {x.dtype for x in t["params"]} == {torch.bfloat16}
    assert {x.dtype for x in t["grads"] + t["master"] + t["exp_avg"]} == {torch.float32}
    assert all(torch.equal(p, m.to(torch.bfloat16)) for p, m in zip(t["params"], t["master"]))
    assert all((a >= b).all() for a, b in zip(t["max_exp_avg_sq"], t["exp_avg_sq"]))
    plain = SPEC.make_inputs(params(), 5, CPU).tensors
    assert plain["master"] is None and plain["max_exp_avg_sq"] is None
    assert not plain["exp_avg"][0].any()  # step 1: PyTorch's zero initial state


def test_one_inf_in_the_last_gradient():
    g = SPEC.make_inputs(params(sizes=[3, 9], grads="inf_one"), 1, CPU).tensors["grads"]
    assert torch.isfinite(g[0]).all() and int(torch.isinf(g[1]).sum()) == 1


@pytest.mark.parametrize("case", [
    dict(preset="mixed", dtype="bfloat16", master=True, amsgrad=True, step=3,
         grads="inf_one"),
    dict(preset="mixed", repeat=3, grad_dtype="float32"),
    dict(preset="tiny_many", repeat=2, grads="nan_one"),
    dict(sizes=[17, 1, 40], repeat=4, step=2),
])
def test_rewrites_build_the_same_tensors_flattened(case):
    # the shrinker takes a rewrite for the same case: every input list must hold the
    # same values in the same order (shapes aside), and check_case must accept it
    p = params(**case)
    ref = SPEC.make_inputs(p, 7, CPU)
    rws = SPEC.params.rewrites(p)
    assert rws and all(r["preset"] == "" for r in rws)
    for r in rws:
        assert SPEC.check_case(r) is None, r
        got = SPEC.make_inputs(r, 7, CPU)
        assert got.attrs == ref.attrs
        for k, v in ref.tensors.items():
            if v is None:
                assert got.tensors[k] is None, k
                continue
            w = got.tensors[k]
            assert len(w) == len(v), k
            for a, b in zip(v, w):  # equal bit for bit, a NaN gradient included
                torch.testing.assert_close(b.flatten(), a.flatten(), rtol=0, atol=0,
                                           equal_nan=True, msg=k)


def test_a_case_without_preset_or_repeat_has_no_rewrite_and_long_lists_are_not_offered():
    assert SPEC.params.rewrites(params(sizes=[5, 6])) == []
    # tiny_many is 32 tensors: 3 repeats written out would be 96, beyond the cap
    (r,) = SPEC.params.rewrites(params(preset="tiny_many", repeat=3))
    assert r["repeat"] == 3 and len(r["sizes"]) == 32


def test_fused_declares_16_bit_parameters_with_fp32_moments_unsupported():
    fused = next(i for i in registry.implementations("adamw") if i.name == "torch_fused")
    assert "refuses 16-bit parameters" in fused.unsupported_reason(
        params(dtype="bfloat16"), "cpu")
    assert fused.unsupported_reason(params(dtype="bfloat16", master=True), "cpu") is None


@pytest.mark.parametrize("line, key, says", [
    ("lr = -0.1", "lr", "below the minimum"),
    ("beta1 = 1.0", "beta1", "must be in [0, 1)"),
    ("beta2 = 1.5", "beta2", "must be in [0, 1)"),
    ("beta1 = -0.5", "beta1", "below the minimum"),
    ("grad_sizes = [7, 4]", "grad_sizes", "disagrees with sizes"),
    ("scaler = false\nloss_scale = 8.0", "loss_scale", "needs scaler = true"),
    ("scaler = false\ngrads = \"inf_one\"", "grads", "needs scaler = true"),
], ids=["lr", "beta1-one", "beta2", "beta1-negative", "lengths", "scale-unscaled",
        "inf-unscaled"])
def test_bad_input_is_one_line_naming_file_and_key(tmp_path, capsys, line, key, says):
    assert_one_line_naming_file_and_key(
        tmp_path, capsys, f'op = "adamw"\n[[case]]\nname = "c"\ntags = ["ci"]\n'
                          f'sizes = [7, 5]\n{line}\n', key, says)
