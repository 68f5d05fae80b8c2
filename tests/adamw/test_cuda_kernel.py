"""Checks of our CUDA AdamW that the case files cannot express: the whole list in one
launch, bitwise reproducibility of the clipped step over repeats, and a list whose
chunks straddle tensors of every size class. GPU only; the conformance itself runs as the
cases' items with --impl cuda."""

import pytest
import torch

from bwd_suite.suite import registry
from bwd_suite.suite.launches import count_launches

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

SPEC = registry.op("adamw")
DEV = torch.device("cuda")


def _impl(name="cuda"):
    return registry.select_implementations("adamw", [name])[0]


def _fresh(inputs):
    return {k: None if v is None else [t.clone() for t in v] if isinstance(v, list)
            else v.clone() for k, v in inputs.tensors.items()}


def _step(inputs, name="cuda"):
    t = _fresh(inputs)
    out = {"found_inf": torch.full((1,), -1.0, device=DEV)}
    _impl(name).fn(**t, **inputs.attrs, out=out)
    torch.cuda.synchronize()
    return t, out


def _case(**kw):
    p = dict(SPEC.params.defaults(), **kw)
    return p, SPEC.make_inputs(p, 5, DEV)


def _bits(x):
    return x.view(torch.int32) if x.dtype == torch.float32 else x.view(torch.int16)


def test_one_launch_for_a_list_of_hundreds_with_clipping():
    p, inputs = _case(sizes=[7, 16385, 1024, 1], repeat=120, dtype="bfloat16", master=True,
                      max_norm=1.0, loss_scale=1024.0)
    t = _fresh(inputs)
    out = {"found_inf": torch.empty(1, device=DEV)}
    n = count_launches(lambda: _impl().fn(**t, **inputs.attrs, out=out), DEV)
    assert n == 1


def test_clipped_step_is_bitwise_reproducible():
    p, inputs = _case(sizes=[50000, 3, 70001], repeat=3, dtype="float16", master=True,
                      amsgrad=True, max_norm=2.0, step=7, steps=3)
    first, _ = _step(inputs)
    for _ in range(10):
        again, _ = _step(inputs)
        for k in ("params", "master", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"):
            for a, b in zip(first[k], again[k]):
                assert torch.equal(_bits(a), _bits(b)), k


def test_an_inf_in_the_last_tensor_leaves_every_tensor_as_it_was():
    p, inputs = _case(sizes=[40000, 9], repeat=50, dtype="bfloat16", grads="inf_one")
    after, out = _step(inputs)
    assert out["found_inf"].item() == 1.0
    for k in ("params", "exp_avg", "exp_avg_sq"):
        for a, b in zip(after[k], inputs.tensors[k]):
            assert torch.equal(_bits(a), _bits(b)), k


def test_matches_the_fp32_foreach_step_on_a_long_mixed_list():
    """fp32 parameters: ours against torch's foreach AdamW, both fp32 arithmetic, to a few
    ulps (the orders of operations differ)."""
    p, inputs = _case(sizes=[1, 5, 16384, 16385, 33000], repeat=20, dtype="float32",
                      weight_decay=0.1, step=3)
    ours, _ = _step(inputs)
    ref, _ = _step(inputs, "torch_foreach")
    for a, b in zip(ours["params"], ref["params"]):
        torch.testing.assert_close(a, b, rtol=2e-6, atol=2e-6)
