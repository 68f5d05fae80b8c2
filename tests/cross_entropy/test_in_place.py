"""Outputs written into an input (Implementation.in_place), on cross_entropy, the way
Liger's kernel writes dlogits into the logits: the implementation gets a fresh copy of
the logits that is also out["dlogits"], the case's logits stay untouched, and under
gradient accumulation each micro-batch's rows are views of that copy."""

from types import MappingProxyType

import pytest
import torch
import torch.nn.functional as F

from bwd_suite.ops.cross_entropy import aligned
from bwd_suite.suite import registry
from bwd_suite.suite.cases import Case
from bwd_suite.suite.outcomes import Verdict
from bwd_suite.suite.registry import Implementation
from bwd_suite.suite.roofline import Ceilings
from bwd_suite.suite.calls import timed_call
from bwd_suite.suite.runner import CaseContext, RunOptions, run_item

SPEC = registry.op("cross_entropy")
CPU = torch.device("cpu")
CEIL = Ceilings(device_name="cpu", copy_gbps=None, copy_source="none", peak_tflops=None)


def writes_into_logits(*, logits, targets, grad_loss, out, ignore_index, label_smoothing,
                       reduction, z_loss, softcap, shift, seq_len):
    assert out["dlogits"] is logits
    x = logits.detach().double().requires_grad_(True)
    loss = F.cross_entropy(x, aligned(targets, shift, seq_len, ignore_index),
                           ignore_index=ignore_index, reduction=reduction,
                           label_smoothing=label_smoothing)
    loss.backward(grad_loss.double())
    out["loss"].copy_(loss.detach())
    logits.copy_(x.grad)


def loss_only(*, out, **kw):
    out["loss"].zero_()


def _run(fn, **params):
    p = dict(SPEC.params.defaults(), dtype="float32", **params)
    case = Case(op="cross_entropy", group="t", id="cross_entropy/t/x", tags=frozenset({"ci"}),
                params=MappingProxyType(p), seed=3, file="<test>")
    opts = RunOptions(device=CPU, golden_device=CPU, repeats=2, timing=True, warmup=1,
                      samples=3, max_time_s=0.2)
    ctx = CaseContext(SPEC, case, opts)
    before = ctx.inputs.tensors["logits"].clone()
    impl = Implementation(op="cross_entropy", name="in_place", fn=fn, kind="external",
                          in_place={"dlogits": "logits"})
    row = run_item(ctx, impl, None, CEIL, {})
    return row, torch.equal(before, ctx.inputs.tensors["logits"]), ctx, impl


@pytest.mark.parametrize("params", [{}, {"accumulation": 2}, {"reduction": "none"}])
def test_gradient_written_into_the_logits_passes_and_the_case_logits_stay(params):
    row, unchanged, _, _ = _run(writes_into_logits, **params)
    assert row.verdict is Verdict.PASS, row.reason
    assert unchanged
    assert row.time_median_s is not None


def test_logits_left_as_they_were_fail_as_dlogits():
    row, unchanged, _, _ = _run(loss_only)
    assert row.verdict is Verdict.FAIL
    assert "dlogits mismatch" in row.reason and unchanged


def test_the_timed_call_gets_a_fresh_copy_each_time():
    _, _, ctx, impl = _run(writes_into_logits)
    call = timed_call(SPEC, impl, ctx.inputs, ctx.case.params)
    seen = []
    for _ in range(2):
        call.setup()
        call()
        seen.append(ctx.inputs.tensors["logits"].clone())
    assert torch.equal(seen[0], seen[1])  # the case's logits, never the gradient
