"""The adamw diagnosis (ops/adamw_diagnosis.py): the mutants' bugs planted one at a time
into the fp32 model of the step (kernels/mutants/adamw.py) on single small cases, the
cause and words of each failing item, and the cases where a bug cannot show (why the ci
profile has the cases it has)."""

import math
from types import MappingProxyType

import pytest
import torch

from bwd_suite.kernels.mutants import adamw as zoo
from bwd_suite.suite import registry
from bwd_suite.suite.cases import Case
from bwd_suite.suite.diagnosis import diagnose_run
from bwd_suite.suite.registry import Implementation
from bwd_suite.suite.roofline import Ceilings
from bwd_suite.suite.runner import CaseContext, RunOptions, run_item

SPEC = registry.op("adamw")
CPU = torch.device("cpu")
CEIL = Ceilings(device_name="cpu", copy_gbps=None, copy_source="none", peak_tflops=None)
OPTS = RunOptions(device=CPU, golden_device=CPU, repeats=1, timing=False)
B = zoo.Bug


def run(fn, **params):
    p = {**SPEC.params.defaults(), "sizes": [7, 130], **params}
    case = Case(op="adamw", group="diag", id="adamw/diag/x", tags=frozenset({"ci"}),
                params=MappingProxyType(p), seed=5, file="<test>")
    impl = Implementation(op="adamw", name="planted", fn=fn, kind="external")
    return run_item(CaseContext(SPEC, case, OPTS), impl, None, CEIL, {})


def bug(b):
    return lambda **kw: zoo.step_fp32(**kw, bugs=frozenset({b}))


def wrong(row) -> set:
    return {o["name"] for o in row.outputs
            if o["err"] > o["allowed"] or o["n_unwritten"] or o["n_nonfinite"]}


@pytest.mark.parametrize("params", [
    {}, {"dtype": "bfloat16", "master": True, "lr": 0.5}, {"dtype": "float16", "step": 2},
    {"amsgrad": True, "step": 2, "steps": 3, "maximize": True},
    {"loss_scale": 1024.0, "max_norm": 2.0}, {"grads": "nan_one", "master": True,
                                              "dtype": "bfloat16"},
    {"preset": "mixed", "sizes": [1000], "grads": "zero", "step": 1000}])
def test_the_model_without_a_bug_passes(params):
    row = run(zoo.clean, **params)
    assert row.verdict == "pass", row.reason


# (bug, case parameters, planted cause, words of the item's diagnosis, outputs wrong)
PLANTED = [
    (B.BIAS_CORRECTION_MISSING, {}, "bias_correction",
     "+1.00 x the update without the bias corrections", {"params"}),
    (B.BIAS_CORRECTION_NEXT_STEP, {"step": 2, "sizes": [130]}, "bias_correction",
     "+1.00 x the update with the bias corrections of step t + 1", {"params"}),
    (B.COUPLED_L2, {"weight_decay": 0.1}, "coupled_decay",
     "+1.00 x the step with weight decay added to the gradient (L2)",
     {"params", "exp_avg", "exp_avg_sq"}),
    (B.EPS_IN_SQRT, {"eps": 1e-3}, "eps_in_sqrt",
     "+1.00 x the update with eps inside the square root", {"params"}),
    (B.CLIP_UNCAPPED, {"max_norm": 100.0}, "clip_above_one",
     "+1.00 x the step with the clip coefficient not capped at 1", None),
    (B.MOMENTS_BF16, {"step": 2, "steps": 3}, "moments_16bit",
     "+1.00 x the step with the moments rounded to bf16", None),
    (B.MASTER_NOT_WRITTEN, {"dtype": "bfloat16", "master": True, "lr": 0.5},
     "master_stale", "params wrong at 100% of its elements, no specific region, error = "
     "-1.00 x the update", {"params"}),
    (B.STEP_PER_TENSOR, {"sizes": [7, 1, 130, 33]}, "step_per_tensor",
     "params wrong in every tensor but the first (tensors 1-3)", {"params"}),
    (B.UNSCALE_MISSING, {"loss_scale": 1024.0}, "unscale_missing",
     "+1.00 x the step on gradients not divided by the loss scale", None),
    (B.AMSGRAD_MAX_UNUSED, {"amsgrad": True, "step": 2}, "amsgrad_unused",
     "+1.00 x the update with v, not amsgrad's max, in the denominator", {"params"}),
    (B.SKIP_IGNORED, {"grads": "inf_one"}, "skip_ignored", "likely skipped step not "
     "honoured on inf/NaN", {"params", "exp_avg", "exp_avg_sq"}),
]


def test_every_bug_of_the_zoo_is_planted_here():
    assert {b for b, *_ in PLANTED} == set(B)
    assert {f.mutant.bug: f.planted_cause for f in zoo.ALL} == \
        {b: cause for b, _, cause, _, _ in PLANTED}


@pytest.mark.parametrize("b, params, cause, words, outputs", PLANTED,
                         ids=[b.name.lower() for b, *_ in PLANTED])
def test_each_bug_is_named_by_its_item_with_its_evidence(b, params, cause, words, outputs):
    row = run(bug(b), **params)
    assert row.verdict == "fail"
    assert row.diagnosis_cause == cause and words in row.diagnosis, row.diagnosis
    if outputs is not None:
        assert wrong(row) == outputs, row.diagnosis


def test_the_step_count_per_tensor_cannot_show_on_one_tensor_and_fits_its_term():
    assert run(bug(B.STEP_PER_TENSOR), sizes=[130]).verdict == "pass"
    row = run(bug(B.STEP_PER_TENSOR), sizes=[7, 1, 130, 33])
    assert "+1.00 x the update with tensor i at step count t + i" in row.diagnosis


def test_the_skip_shows_only_with_an_inf_or_nan_and_found_inf_stays_right():
    assert run(bug(B.SKIP_IGNORED)).verdict == "pass"
    row = run(bug(B.SKIP_IGNORED), grads="nan_one", master=True, dtype="bfloat16")
    assert row.diagnosis_cause == "skip_ignored" and "found_inf" not in wrong(row)


def test_a_clipping_max_norm_hides_the_uncapped_coefficient_and_the_missing_unscale():
    # N(0, 1) gradients of 137 elements have a norm near 12: 2.0 clips them, and the
    # clip coefficient then cancels any constant factor of the gradients
    assert run(bug(B.CLIP_UNCAPPED), max_norm=2.0).verdict == "pass"
    assert run(bug(B.UNSCALE_MISSING), loss_scale=1024.0, max_norm=2.0).verdict == "pass"


def test_a_stale_16bit_parameter_needs_an_lr_past_its_tolerance():
    assert run(bug(B.MASTER_NOT_WRITTEN), dtype="bfloat16", master=True).verdict == "pass"


def test_bias_correction_and_amsgrad_bugs_leave_the_moments_right():
    for b, params in ((B.BIAS_CORRECTION_MISSING, {"dtype": "float16", "master": True}),
                      (B.AMSGRAD_MAX_UNUSED, {"amsgrad": True, "step": 2, "steps": 3})):
        row = run(bug(b), **params)
        assert row.verdict == "fail" and not wrong(row) & {"exp_avg", "exp_avg_sq"}


# ---------------------------------------------------------------- bugs of ports

def port(*, decay_after=False, clip_per_tensor=False, norm_scaled=False,
         bc2_unrooted=False, maximize_on_update=False):
    """An fp32 AdamW step written apart from the zoo's model, with the bugs ordinary ports
    made (tests/data/ports/adamw/) as switches; all off, a right step."""
    def step(*, params, grads, master, exp_avg, exp_avg_sq, max_exp_avg_sq, lr, beta1,
             beta2, eps, weight_decay, step, steps, maximize, amsgrad, scaler, loss_scale,
             max_norm, out):
        raw = [x.double() for x in grads]
        g = [x / loss_scale for x in raw]
        out["found_inf"].zero_()
        if max_norm > 0:
            norm = lambda xs: math.sqrt(sum(float((x * x).sum()) for x in xs))  # noqa: E731
            if clip_per_tensor:
                g = [x * min(1.0, max_norm / (norm([x]) + 1e-6)) for x in g]
            else:
                c = min(1.0, max_norm / (norm(raw if norm_scaled else g) + 1e-6))
                g = [x * c for x in g]
        for i, p in enumerate(params):
            w = (master[i] if master is not None else p).double()
            m, v = exp_avg[i].double(), exp_avg_sq[i].double()
            gi = -g[i] if maximize and not maximize_on_update else g[i]
            for t in range(step, step + steps):
                if not decay_after:
                    w = w * (1 - lr * weight_decay)
                m = beta1 * m + (1 - beta1) * gi
                v = beta2 * v + (1 - beta2) * gi * gi
                bc2 = 1 - beta2 ** t
                den = v.sqrt() / (bc2 if bc2_unrooted else math.sqrt(bc2)) + eps
                u = lr / (1 - beta1 ** t) * m / den
                w = w + u if maximize and maximize_on_update else w - u
                if decay_after:
                    w = w * (1 - lr * weight_decay)
            exp_avg[i].copy_(m)
            exp_avg_sq[i].copy_(v)
            if master is not None:
                master[i].copy_(w)
            p.copy_(w)
    return step


# (bug switch, case parameters, cause, the words of the story that explains it)
PORTED = [
    ("decay_after", {"lr": 0.5, "weight_decay": 0.1}, "decay_after_update",
     "+1.00 x the step with the weight decay applied after the update"),
    ("clip_per_tensor", {"max_norm": 2.0}, "clip_per_tensor",
     "+1.00 x the step with each gradient clipped by its own norm"),
    ("norm_scaled", {"max_norm": 2.0, "loss_scale": 1024.0}, "clip_norm_scaled",
     "+1.00 x the step with the clip norm taken of the gradients still times the loss "
     "scale"),
    ("bc2_unrooted", {}, "bias_correction_unrooted",
     "+1.00 x the update with sqrt(v) divided by 1 - beta2^t, not by its root"),
    ("maximize_on_update", {"maximize": True, "steps": 2}, "maximize_on_update",
     "+1.00 x the step with maximize negating the update, not the gradient"),
]


@pytest.mark.parametrize("switch, params, cause, words", PORTED, ids=[p[0] for p in PORTED])
def test_a_port_bug_without_a_mutant_is_named_by_its_story(switch, params, cause, words):
    assert run(port(), **params).verdict == "pass"
    row = run(port(**{switch: True}), **params)
    assert row.verdict == "fail", row.reason
    assert row.diagnosis_cause == cause and words in row.diagnosis, row.diagnosis
    assert diagnose_run([row])[0].cause == cause


def test_the_port_stories_are_tested_only_where_they_differ_from_the_golden():
    # one tensor: its own norm is the list's; no loss scale: the two norms agree; no
    # maximize: nothing to negate
    assert run(port(clip_per_tensor=True), sizes=[130], max_norm=2.0).verdict == "pass"
    assert run(port(norm_scaled=True), max_norm=2.0).verdict == "pass"
    row = run(port(decay_after=True), sizes=[130], max_norm=2.0, lr=0.5, weight_decay=0.1)
    assert row.diagnosis_cause == "decay_after_update", row.diagnosis
    fitted = {f["term"] for f in row.error_terms}
    assert "decay_after_update" in fitted
    assert not fitted & {"clip_per_tensor", "clip_norm_scaled", "maximize_on_update"}
