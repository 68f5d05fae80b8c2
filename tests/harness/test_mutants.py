"""The mutant zoo: every deliberately broken implementation of every op is caught by the
default CI cases (mutation score 100% per op), in the output its bug damages, and the
cross-case diagnosis names the planted cause for at least 90% of each op's mutants
(`python -m bwd_suite mutants` prints the tables; docs/mutants.md). The zoo runs once per
module (the `zoo` fixture): the per-mutant checks share it, so CI pays for it once."""

import pytest
import torch

from bwd_suite.kernels.causal_conv1d.tiled import Bug
from bwd_suite.kernels.mutants import adamw as adamw_zoo
from bwd_suite.kernels.mutants import attention as attention_zoo
from bwd_suite.kernels.mutants import causal_conv1d as conv_zoo
from bwd_suite.kernels.mutants import cross_entropy as ce_zoo
from bwd_suite.kernels.mutants import layer_norm as ln_zoo
from bwd_suite.kernels.mutants import linear as linear_zoo
from bwd_suite.kernels.mutants import softmax as sm_zoo
from bwd_suite.kernels.mutants.causal_conv1d import ALL
from bwd_suite.ops.causal_conv1d_causes import Cause
from bwd_suite.suite import registry
from bwd_suite.suite.cases import load_cases
from bwd_suite.cli import main
from bwd_suite.suite.commands.mutants import MIN_ACCURACY, render, run_zoo, select_mutants
from bwd_suite.suite.diagnosis import Generic
from bwd_suite.suite.registry import Implementation
from bwd_suite.suite.roofline import Ceilings
from bwd_suite.suite.runner import CaseContext, RunOptions, run_item

CPU = torch.device("cpu")
CEIL = Ceilings(device_name="cpu", copy_gbps=None, copy_source="none", peak_tflops=None)
OPTS = RunOptions(device=CPU, golden_device=CPU, repeats=1, timing=False)
OPS = ("adamw", "attention", "causal_conv1d", "cross_entropy", "layer_norm", "linear",
       "softmax")
# per op: its zoo module, the model without a bug (to check the catching case is fair)
ZOOS = {"adamw": adamw_zoo, "attention": attention_zoo, "causal_conv1d": conv_zoo,
        "cross_entropy": ce_zoo, "layer_norm": ln_zoo, "linear": linear_zoo, "softmax": sm_zoo}
MIN_MUTANTS = {"adamw": 9, "attention": 8, "causal_conv1d": 12, "cross_entropy": 8,
               "layer_norm": 8, "linear": 6, "softmax": 8}


def _clean(op):
    if op == "causal_conv1d":
        return registry.select_implementations(op, ["torch_tiled"])[0]
    return Implementation(op=op, name="clean_model", fn=ZOOS[op].clean, kind="external")


# mutant -> an output its bug must show up in (an oracle independent of the diagnosis)
EXPECTED_OUTPUT = {
    "mutant_missing_right_halo": "dx",
    "mutant_missing_right_halo_tile128": "dx",
    "mutant_halo_twice_in_dweight": "dweight",
    "mutant_missing_dfinal_path": "dx",
    "mutant_mask_crosses_boundary": "dx",
    "mutant_silu_recompute_without_bias": "dbias",
    "mutant_wrong_silu_derivative": "dbias",
    "mutant_silu_recompute_missing_right_halo": "dx",
    "mutant_dfinal_times_weight": "dx",
    "mutant_dfinal_times_silu_derivative": "dx",
    "mutant_short_seq_state_dropped": "dx",
    "mutant_dinit_missing_dfinal_path": "dinitial_states",
    "mutant_mask_source_id": "dx",
    "mutant_seq_idx_ignored_in_dweight": "dweight",
    "mutant_padding_not_masked": "dbias",
    "mutant_batch_lost_in_dweight": "dweight",
    "mutant_tail_gradients_not_zeroed": "dx",
    "mutant_channel_tail_dweight_dropped": "dweight",
    "mutant_ln_dgamma_last_row_block": "dgamma",
    "mutant_ln_mean_in_input_dtype": "dx",
    "mutant_ln_dot_short": "dx",
    "mutant_ln_dgamma_16bit_accumulator": "dgamma",
    "mutant_ln_row_stride_padded": "dx",
    "mutant_ln_dbeta_skips_first_row": "dbeta",
    "mutant_ln_mean_twice": "dx",
    "mutant_ln_last_row_not_written": "dx",
    "mutant_ln_dx_without_gamma": "dx",
    "mutant_ln_column_tail_no_xhat": "dx",
    "mutant_ln_dgamma_tile_offset": "dgamma",
    "mutant_softmax_scale_twice": "dx",
    "mutant_softmax_scale_missing": "dx",
    "mutant_softmax_dot_short": "dx",
    "mutant_softmax_mask_not_in_dot": "dx",
    "mutant_softmax_mask_inverted": "dx",
    "mutant_softmax_last_row_not_written": "dx",
    "mutant_softmax_row_stride_padded": "dx",
    "mutant_softmax_column_tail_no_dot": "dx",
    "mutant_softmax_tile_offset": "dx",
    "mutant_softmax_row_group_shared_dot": "dx",
    "mutant_adamw_bias_correction_missing": "params",
    "mutant_adamw_bias_correction_next_step": "params",
    "mutant_adamw_coupled_l2": "exp_avg",
    "mutant_adamw_eps_in_sqrt": "params",
    "mutant_adamw_skip_ignored": "exp_avg",
    "mutant_adamw_clip_uncapped": "exp_avg",
    "mutant_adamw_moments_bf16": "exp_avg_sq",
    "mutant_adamw_master_not_written": "params",
    "mutant_adamw_step_per_tensor": "params",
    "mutant_adamw_unscale_missing": "exp_avg",
    "mutant_adamw_amsgrad_max_unused": "master",
    "mutant_ce_mean_all_tokens": "loss",
    "mutant_ce_shift_ignored": "dlogits",
    "mutant_ce_shift_crosses_sequences": "dlogits",
    "mutant_ce_ignored_tokens_get_gradient": "dlogits",
    "mutant_ce_smoothing_v_minus_1": "dlogits",
    "mutant_ce_z_loss_gradient_missing": "dlogits",
    "mutant_ce_softcap_derivative_missing": "dlogits",
    "mutant_ce_empty_mean_nan": "loss",
    "mutant_ce_lse_in_logits_dtype": "loss",
    "mutant_attn_causal_wrong_corner": "dq",
    "mutant_attn_gqa_first_head_only": "dk",
    "mutant_attn_ds_scale_missing": "dq",
    "mutant_attn_ds_scale_twice": "dk",
    "mutant_attn_d_missing": "dq",
    "mutant_attn_d_over_queries": "dk",
    "mutant_attn_empty_rows_nan": "dq",
    "mutant_attn_dk_dv_swapped": "dv",
    "mutant_attn_last_key_block_dropped": "dk",
    "mutant_attn_window_left_exclusive": "dv",
    "mutant_linear_dw_transposed": "dw",
    "mutant_linear_db_wrong_axis": "db",
    "mutant_linear_derivative_at_output": "dx",
    "mutant_linear_tanh_for_erf": "dx",
    "mutant_linear_dx_no_derivative": "dx",
    "mutant_linear_db_16bit_sum": "db",
    "mutant_linear_db_unwritten": "db",
    "mutant_linear_wgrad_preactivation": "dw",
}
# the bugs issue 5 asks for, each planted by some mutant
ISSUE_BUGS = {Bug.NO_RIGHT_HALO, Bug.HALO_IN_DWEIGHT, Bug.SILU_NO_BIAS,
              Bug.SILU_WRONG_DERIVATIVE, Bug.SILU_NO_INPUT_HALO, Bug.NO_DFINAL,
              Bug.DFINAL_TIMES_WEIGHT, Bug.DFINAL_TIMES_SILU_GRAD, Bug.SHORT_SEQ_NO_STATE,
              Bug.MASK_SOURCE_ID, Bug.DWEIGHT_NO_MASK, Bug.PADDING_NOT_MASKED,
              Bug.DWEIGHT_BATCH0_ONLY, Bug.DINIT_NO_DFINAL}


@pytest.fixture(scope="module")
def zoo():
    """Every mutant of every op on the default CI cases, once: (report, rows, cases)."""
    cases = {op: load_cases(op=op, profile="ci") for op in OPS}
    ids = {c.id for cs in cases.values() for c in cs}  # the same cases for every check
    rows = []
    # one intra-op thread, as `run` uses on a CPU: tiny tensors on a busy 2-core machine
    # spend more on the thread hand-off than on the work (attention's zoo: 450 s -> 27 s)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        report = run_zoo(select_mutants(), profile="ci", device="cpu", on_row=rows.append,
                         case_filter=lambda c: c.id in ids)
    finally:
        torch.set_num_threads(before)
    return report, rows, cases


def test_the_zoo_plants_every_bug_of_the_issue_with_a_declared_cause():
    impls = [f.implementation for f in ALL]
    assert len(impls) >= 12
    assert {i.name for i in select_mutants()} == set(EXPECTED_OUTPUT)
    assert ISSUE_BUGS <= {f.mutant.bug for f in ALL}
    assert {f.mutant.bug for f in ALL} == set(Bug), "a Bug no mutant plants"
    causes = {c.value for c in Cause}
    for f in ALL:
        assert f.implementation.kind == "mutant"
        assert f.planted_cause in causes, f.__name__
        assert "Symptom:" in f.__doc__ and f.mutant.bug.value in f.__doc__


@pytest.mark.parametrize("op", OPS)
def test_every_op_has_a_zoo_whose_mutants_plant_every_bug(op):
    module = ZOOS[op]
    assert len(module.ALL) >= MIN_MUTANTS[op]
    assert {f.implementation.name for f in module.ALL} == \
        {i.name for i in select_mutants(op=op)}
    assert {f.mutant.bug for f in module.ALL} == set(module.Bug), "a Bug no mutant plants"
    causes = {c.cause.value for c in registry.op(op).diagnosis.causes}
    for f in module.ALL:
        assert f.implementation.kind == "mutant" and f.implementation.op == op
        assert f.planted_cause in causes, f.__name__
        assert "Symptom:" in f.__doc__ and f.mutant.bug.value in f.__doc__
    # the period search's generic causes are in every op's table
    assert {g.value for g in Generic} <= causes


@pytest.mark.parametrize("op", OPS)
def test_mutation_score_100_and_diagnosis_accuracy_per_op_on_the_default_ci_cases(zoo, op):
    """The issue's acceptance test, per op, on the shared run of the whole zoo."""
    report, rows, cases = zoo
    part = report.of(op)
    table = render(part, verbose=True)
    assert part.n_cases == len(cases[op])
    survivors = [r.name for r in part.results if not r.caught]
    assert not survivors, f"mutants no ci case catches: {survivors}\n{table}"
    assert part.mutation_score == 1.0
    assert part.accuracy >= MIN_ACCURACY, table
    # measured 100%: a regression of any single mutant shows here first
    wrong = [(r.name, r.diagnosis.cause, r.planted) for r in part.results if not r.correct]
    assert not wrong, f"diagnosis misses: {wrong}\n{table}"

    failing = [r for r in rows if r.op == op and r.verdict == "fail"]
    # every failing item is diagnosed, with a location or a term fit as evidence, unless
    # an output is wrong at every element (nothing to localise) or not finite (no fit)
    assert all(r.diagnosis and not r.diagnosis.startswith("diagnosis failed")
               for r in failing)
    bare = [r for r in failing if not (r.error_locations or r.error_terms) and not any(
        o["n_bad"] == o["numel"] or o["n_unwritten"] or o["n_nonfinite"]
        for o in r.outputs)]
    assert not bare, [(r.impl, r.case_id, r.diagnosis) for r in bare[:5]]
    names = {r.name for r in part.results}
    for name in names:
        output = EXPECTED_OUTPUT[name]
        hit = [r for r in failing if r.impl == name and any(
            o["name"] == output and (o["err"] > o["allowed"] or o["n_unwritten"])
            for o in r.outputs)]
        assert hit, f"{name}: no ci case fails it in {output}"

    # the first case failing each mutant passes without the planted bug
    reference = _clean(op)
    by_id = {c.id: c for c in cases[op]}
    spec = registry.op(op)
    for case_id in {next(r.case_id for r in failing if r.impl == n) for n in names}:
        clean = run_item(CaseContext(spec, by_id[case_id], OPTS), reference, None, CEIL, {})
        assert clean.verdict == "pass", (case_id, clean.reason)


def test_the_report_is_per_op_and_ok_only_when_every_op_is(zoo):
    report = zoo[0]
    text = render(report)
    for op in OPS:
        assert f"{op}: mutation score" in text
    assert report.ok
    assert [op for op, _ in report.cases_by_op] == sorted(OPS)


def test_mutants_command_prints_the_table_and_its_exit_code(capsys):
    assert main(["mutants", "--profile", "smoke", "--mutant",
                 "mutant_missing_right_halo"]) == 0
    out = capsys.readouterr().out
    assert "mutant_missing_right_halo" in out and "right_halo" in out
    assert "mutation score 1/1 (100%), diagnosis accuracy 1/1 (100%)" in out


def test_mutants_command_fails_when_a_mutant_survives(capsys):
    # every smoke case has a dim that is a multiple of 8: the channel-tail bug survives
    code = main(["mutants", "--profile", "smoke", "--mutant", "mutant_batch_lost_in_dweight",
                 "--mutant", "mutant_channel_tail_dweight_dropped"])
    out = capsys.readouterr().out
    assert code == 1
    assert "survived" in out and "mutation score 1/2 (50%)" in out


def test_unknown_mutant_is_a_one_line_error(capsys):
    assert main(["mutants", "--mutant", "mutant_missing_rihgt_halo"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("error: --mutant") and "mutant_missing_right_halo" in err[0]


@pytest.mark.parametrize("op", OPS)
def test_mutants_are_not_run_by_default(op):
    default = registry.select_implementations(op, None)
    assert not [i for i in default if i.kind == "mutant"]
