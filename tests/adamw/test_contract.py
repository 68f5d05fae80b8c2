"""The in-place contract (OpSpec.mutates, OpSpec.consumes) and list inputs, on the adamw
op: updated copies are checked as outputs, consumed ones are scratch, each call starts
from the case's values."""

import dataclasses
from types import MappingProxyType

import pytest

import torch

from bwd_suite.kernels.adamw.torch_ref import torch_ref
from bwd_suite.suite import registry
from bwd_suite.suite.cases import Case
from bwd_suite.suite.outcomes import Determinism, FailureKind, Verdict
from bwd_suite.suite.registry import Implementation
from bwd_suite.suite.roofline import Ceilings
from bwd_suite.suite.calls import timed_call
from bwd_suite.suite.runner import CaseContext, RunOptions, run_item

SPEC = registry.op("adamw")
CPU = torch.device("cpu")
CEIL = Ceilings(device_name="cpu", copy_gbps=None, copy_source="none", peak_tflops=None)


def make_case(**overrides) -> Case:
    params = dict(SPEC.params.defaults(), sizes=[7, 30, 5], step=2, **overrides)
    return Case(op="adamw", group="t", id="adamw/t/x", tags=frozenset({"ci"}),
                params=MappingProxyType(params), seed=99, file="<test>")


def run(fn, case=None, repeats=2, timing=False):
    opts = RunOptions(device=CPU, golden_device=CPU, repeats=repeats, timing=timing,
                      warmup=1, samples=3, max_time_s=0.5)
    ctx = CaseContext(SPEC, case or make_case(), opts)
    return run_item(ctx, Implementation(op="adamw", name="under_test", fn=fn,
                                        kind="external"), None, CEIL, {})


def test_the_for_loop_passes_bitwise_over_repeats():
    # bitwise: every repeat got fresh copies (a second step on the same tensors would differ)
    row = run(torch_ref, repeats=3)
    assert row.verdict is Verdict.PASS, row.reason
    assert row.determinism is Determinism.BITWISE
    assert {o["name"] for o in row.outputs} == {"params", "exp_avg", "exp_avg_sq",
                                                "found_inf"}


def test_not_updating_in_place_fails():
    def on_copies(*, params, exp_avg, exp_avg_sq, **kw):
        torch_ref(params=[p.clone() for p in params], exp_avg=[m.clone() for m in exp_avg],
                  exp_avg_sq=[v.clone() for v in exp_avg_sq], **kw)
    row = run(on_copies)
    assert row.verdict is Verdict.FAIL and row.failure_kind is FailureKind.MISMATCH
    assert "params mismatch" in row.reason


def test_gradients_are_scratch_copied_afresh_for_every_call():
    """grads are `consumes`: writing them is allowed (GradScaler does), and every call,
    repeats included, gets the case's values again: had the harness handed the same
    tensors twice, the repeat would see NaN gradients, skip, and differ from the first."""
    def scribbles_after(*, grads, **kw):
        torch_ref(grads=grads, **kw)
        for g in grads:
            g.fill_(float("nan"))
    row = run(scribbles_after)
    assert row.verdict is Verdict.PASS, row.reason


def test_an_input_in_mutates_and_consumes_is_refused():
    with pytest.raises(ValueError, match="both mutates and consumes"):
        dataclasses.replace(SPEC, consumes=("grads", "params"))


def test_right_values_in_a_replaced_tensor_fail():
    def replaces(*, params, **kw):
        new = [p.clone() for p in params]
        torch_ref(params=new, **kw)
        params[:] = new  # the list now holds other tensors with the right values
    row = run(replaces)
    assert row.verdict is Verdict.FAIL and row.failure_kind is FailureKind.REPLACED
    assert "input replaced, not updated in place" in row.reason and "params" in row.reason


def test_new_storage_behind_the_same_tensor_fails():
    def swaps_data(*, exp_avg, **kw):
        new = [m.clone() for m in exp_avg]
        torch_ref(exp_avg=new, **kw)
        for m, n in zip(exp_avg, new):
            m.data = n
    row = run(swaps_data)
    assert row.verdict is Verdict.FAIL and row.failure_kind is FailureKind.REPLACED
    assert "exp_avg" in row.reason


def test_a_wrong_element_is_named_by_tensor_and_index():
    def one_wrong(*, params, **kw):
        torch_ref(params=params, **kw)
        params[1][17] += 0.5
    row = run(one_wrong)
    assert row.verdict is Verdict.FAIL
    worst = next(o for o in row.outputs if o["name"] == "params")
    assert worst["worst_index"] == "[1][17]" and worst["n_bad"] == 1
    assert worst["numel"] == 42


def test_every_call_and_timed_sample_starts_from_the_case_values():
    seen = []

    def checks_fresh(*, params, **kw):
        seen.append(params[0].clone())
        torch_ref(params=params, **kw)
    row = run(checks_fresh, repeats=2, timing=True)
    assert row.verdict is Verdict.PASS, row.reason
    assert row.time_samples_s and len(seen) >= 2 + 1 + len(row.time_samples_s)
    assert all(torch.equal(s, seen[0]) for s in seen)


def test_found_inf_skips_every_tensor():
    case = make_case(grads="inf_one", amsgrad=True)
    row = run(torch_ref, case)
    assert row.verdict is Verdict.PASS, row.reason

    def skips_only_the_bad_one(*, params, grads, exp_avg, exp_avg_sq, max_exp_avg_sq,
                               out, **kw):
        finite = [i for i, g in enumerate(grads) if torch.isfinite(g).all()]
        pick = lambda xs: [xs[i] for i in finite]  # noqa: E731
        torch_ref(params=pick(params), grads=pick(grads), exp_avg=pick(exp_avg),
                  exp_avg_sq=pick(exp_avg_sq), max_exp_avg_sq=pick(max_exp_avg_sq),
                  out=out, **kw)
        out["found_inf"].fill_(1.0)
    row = run(skips_only_the_bad_one, case)
    assert row.verdict is Verdict.FAIL and "params mismatch" in row.reason


def test_master_weights_and_their_cast():
    # lr 0.5: an update past the bf16 spacing of the largest parameter, so that a
    # parameter left behind is beyond the tolerance (at 1e-3 bf16 swallows it)
    case = make_case(dtype="bfloat16", master=True, lr=0.5)
    row = run(torch_ref, case)
    assert row.verdict is Verdict.PASS, row.reason

    def forgets_the_cast(*, params, master, **kw):
        torch_ref(params=[p.clone() for p in params], master=master, **kw)
    row = run(forgets_the_cast, case)
    assert row.verdict is Verdict.FAIL and "params mismatch" in row.reason
    assert "master" not in row.reason


def test_timed_calls_step_the_same_tensors_from_the_case_values():
    """Timing restores the case's values into copies made once (a training loop steps the
    same tensors); each call still starts from the case's values, and an element the
    implementation replaced does not stay in the list."""
    seen = []

    def records(*, params, grads, **kw):
        seen.append(([id(p) for p in params], [p.clone() for p in params],
                     [g.clone() for g in grads]))
        torch_ref(params=params, grads=grads, **kw)
        for g in grads:
            g.fill_(float("nan"))
        params[0] = params[0].clone()  # replaced: the next call must get the kept tensor

    opts = RunOptions(device=CPU, golden_device=CPU, repeats=1, timing=False)
    ctx = CaseContext(SPEC, make_case(), opts)
    impl = Implementation(op="adamw", name="under_test", fn=records, kind="external")
    call = timed_call(SPEC, impl, ctx.inputs, ctx.case.params)
    for _ in range(3):
        call.setup()
        call()
    ids, first_p, first_g = seen[0]
    case_p, case_g = ctx.inputs.tensors["params"], ctx.inputs.tensors["grads"]
    for later_ids, p, g in seen[1:]:
        assert later_ids == ids
        assert all(torch.equal(a, b) for a, b in zip(p, first_p))
        assert all(torch.equal(a, b) for a, b in zip(g, first_g))
    assert all(torch.equal(a, b) for a, b in zip(first_p, case_p))
    assert all(torch.equal(a, b) for a, b in zip(first_g, case_g))
    assert all(not a.isnan().any() for a in case_g)  # the case's own never handed out
    assert all(id(a) not in ids for a in case_p)
