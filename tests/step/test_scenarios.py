"""The training step as a conformance case (suite/step/): the ci scenarios under eager PyTorch
and under other implementations pass every step against float64 and every equivalence; the
per-micro-batch mean fails as declared; and bugs planted in the step (an op's backward, the
accumulation's denominator, a recomputation's dropout RNG, a mask on the wrong token, a
skip for one tensor only) are caught by the check that must catch them."""

import dataclasses

import pytest
import torch

from bwd_suite.suite.outcomes import Verdict
from bwd_suite.suite.step import checks as ck
from bwd_suite.suite.step import runner, scenario
from bwd_suite.suite.step.loop import Variant


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


SCENARIOS = {s.name: s for s in scenario.load(profile="ci")}


def only(name: str, *checks: str) -> scenario.Scenario:
    """The ci scenario `name` with these checks alone (faster)."""
    s = SCENARIOS[name]
    return dataclasses.replace(s, checks=tuple(checks) or s.checks)


def run(s, impl=None) -> dict:
    return {r.case_id.rsplit("/", 1)[-1]: r
            for r in runner.run_scenario(s, runner.choice_set(s, impl), "cpu")}


@pytest.fixture(scope="module")
def eager_rows():
    return {name: run(s) for name, s in SCENARIOS.items()}


def test_the_ci_scenarios_pass_every_check_under_eager_pytorch(eager_rows):
    assert set(eager_rows) >= {"mamba-tiny-fp32", "mamba-tiny-bf16", "transformer-tiny-fp32",
                               "transformer-tiny-bf16", "mamba-tiny-dropout"}
    for name, rows in eager_rows.items():
        for check, r in rows.items():
            if check == "accumulation_mean":
                # declared to fail, and failing: expected, not counted against the run
                assert r.verdict is Verdict.FAIL and r.expected and not r.counts_against
            else:
                assert r.verdict is Verdict.PASS, (name, check, r.reason)


def test_every_step_and_quantity_is_compared(eager_rows):
    r = eager_rows["mamba-tiny-bf16"]["float64"]
    steps = SCENARIOS["mamba-tiny-bf16"].params["steps"]
    names = {o["name"] for o in r.outputs}
    assert names == {f"step{t}.{q}" for t in range(1, steps + 1)
                     for q in ("loss", "grads", "params", "exp_avg", "exp_avg_sq")}
    # the bound grows with the step: the ceiling and floor of step 3 are 3 times step 1's
    assert all(o["allowed"] > 0 and o["err"] <= o["allowed"] for o in r.outputs)
    loss = {o["name"]: o for o in eager_rows["mamba-tiny-bf16"]["loss"].outputs}
    assert set(loss) == {f"step{t}.loss" for t in range(1, steps + 1)}


def test_the_equivalences_are_bitwise_where_nothing_should_change(eager_rows):
    for rows in eager_rows.values():
        for check in ("checkpoint", "offload"):
            # every eager backward is deterministic: compared bit for bit with the plain run
            assert all(o["allowed"] == 0.0 and o["err"] == 0.0 for o in rows[check].outputs)
    skipped = eager_rows["mamba-tiny-bf16"]["overflow"]
    assert {o["name"] for o in skipped.outputs} == {f"step2.{k}" for k in
                                                    ("params", "master", "exp_avg",
                                                     "exp_avg_sq")}


def test_other_implementations_pass_the_step():
    """Reference kernels of each op in the 16-bit scenarios, bounded by eager's errors."""
    rows = run(only("mamba-tiny-bf16", "float64", "accumulation", "chunked_state"),
               "causal_conv1d=torch_tiled,layer_norm=xhat_form,cross_entropy=torch_fp32,"
               "adamw=torch_foreach")
    assert all(r.verdict is Verdict.PASS for r in rows.values()), \
        {k: r.reason for k, r in rows.items()}
    rows = run(only("transformer-tiny-bf16", "float64"),
               "attention=torch_tiled,layer_norm=x_form,adamw=torch_fused")
    assert rows["float64"].verdict is Verdict.PASS, rows["float64"].reason


@pytest.mark.parametrize("scenario_name, impl, check, words", [
    # an op's backward wrong (the suite's own mutants): the float64 check names the step
    ("mamba-tiny-fp32", "layer_norm=mutant_ln_dx_without_gamma", "float64", "step 1, grads"),
    ("transformer-tiny-fp32", "attention=mutant_attn_dk_dv_swapped", "float64",
     "step 1, grads"),
    # the optimizer steps although a gradient overflowed
    ("mamba-tiny-fp32", "adamw=mutant_adamw_skip_ignored", "overflow", "not bitwise"),
    # the skip applied to the tensor holding the inf alone
    ("mamba-tiny-fp32", "adamw=tests.step.planted:adamw_skips_one_tensor", "overflow",
     "not bitwise equal to its value before the skipped step"),
    # the labels scored at their own position, not the next one's: the loss stays a float
    ("transformer-tiny-fp32", "cross_entropy=tests.step.planted:ce_unshifted", "float64",
     "step 1, loss"),
])
def test_a_planted_bug_fails_its_check(scenario_name, impl, check, words):
    r = run(only(scenario_name, check), impl)[check]
    assert r.verdict is Verdict.FAIL and r.counts_against
    assert words in r.reason


def test_the_micro_batch_mean_in_place_of_the_global_denominator_is_caught(monkeypatch):
    """The 2024 gradient-accumulation bug planted in the accumulation check's own run."""
    bug = dataclasses.replace(ck.CHECKS["accumulation"],
                              variant=lambda p, c: Variant("accumulation", micro_batches=2,
                                                           per_micro_batch_mean=True))
    monkeypatch.setitem(ck.CHECKS, "accumulation", bug)
    r = run(only("transformer-tiny-bf16", "accumulation"))["accumulation"]
    assert r.verdict is Verdict.FAIL and not r.known_failure


def test_a_recomputation_with_other_dropout_masks_is_caught(monkeypatch):
    """torch.utils.checkpoint without preserve_rng_state: the recomputed block draws other
    dropout masks than its forward did."""
    bug = dataclasses.replace(ck.CHECKS["checkpoint"],
                              variant=lambda p, c: Variant("checkpoint",
                                                           checkpoint=frozenset(c),
                                                           preserve_rng=False))
    monkeypatch.setitem(ck.CHECKS, "checkpoint", bug)
    r = run(only("mamba-tiny-dropout", "checkpoint"))["checkpoint"]
    assert r.verdict is Verdict.FAIL and "not bitwise equal to the plain run" in r.reason


def test_an_implementation_that_raises_costs_its_checks_not_the_run():
    """The checks whose runs call it are errors with its exception; the float64 model and
    the eager runs go on."""
    rows = run(only("mamba-tiny-fp32", "float64", "offload", "accumulation_mean"),
               "causal_conv1d=tests.helpers:raising")
    for check, r in rows.items():
        assert r.verdict is Verdict.ERROR and "deliberate failure" in r.reason, check
    # a declared failure that errs is still expected: an error is a failure
    assert rows["accumulation_mean"].expected
