"""The LayerNorm diagnosis (ops/layer_norm_diagnosis.py): the mutants' bugs planted one at
a time into the blocked fp32 model (kernels/mutants/layer_norm.py) on single cases, and
the words and cause of each failing item; the rules that need no mutant on synthetic
evidence."""

from types import MappingProxyType

import pytest
import torch

from bwd_suite.kernels.mutants import layer_norm as zoo
from bwd_suite.suite import diagnosis as dg
from bwd_suite.suite import registry
from bwd_suite.suite.cases import Case
from bwd_suite.suite.registry import Implementation
from bwd_suite.suite.roofline import Ceilings
from bwd_suite.suite.runner import CaseContext, RunOptions, run_item

SPEC = registry.op("layer_norm")
CPU = torch.device("cpu")
CEIL = Ceilings(device_name="cpu", copy_gbps=None, copy_source="none", peak_tflops=None)
OPTS = RunOptions(device=CPU, golden_device=CPU, repeats=1, timing=False)


def run(fn, **params):
    p = {**SPEC.params.defaults(), "rows": 13, "hidden": 100, "dtype": "float32", **params}
    case = Case(op="layer_norm", group="diag", id="layer_norm/diag/x",
                tags=frozenset({"ci"}), params=MappingProxyType(p), seed=5, file="<test>")
    impl = Implementation(op="layer_norm", name="planted", fn=fn, kind="external")
    return run_item(CaseContext(SPEC, case, OPTS), impl, None, CEIL, {})


def bug(b):
    return lambda **kw: zoo.backward_blocked(**kw, bugs=frozenset({b}))


@pytest.mark.parametrize("params", [{}, {"dtype": "bfloat16", "rows": 5, "hidden": 33},
                                    {"x_mean": 1000.0, "hidden": 256}])
def test_the_model_without_a_bug_passes(params):
    row = run(zoo.clean, **params)
    assert row.verdict == "pass", row.reason


@pytest.mark.parametrize("mutant", zoo.ALL, ids=lambda f: f.__name__)
def test_every_mutant_registers_as_a_mutant_with_a_cause_of_the_table(mutant):
    impl = mutant.implementation
    assert impl.kind == "mutant" and impl.op == "layer_norm"
    assert SPEC.diagnosis.cause_spec(mutant.planted_cause) is not None
    assert "Symptom:" in mutant.__doc__


def test_dgamma_without_the_last_row_block_is_minus_those_rows():
    row = run(bug(zoo.Bug.DGAMMA_LAST_ROW_BLOCK))  # 13 rows: row 12 is a partial block
    assert row.diagnosis_cause == "row_block_tail", row.diagnosis
    assert "-1.00 x the rows past the last multiple of 4" in row.diagnosis
    # with whole blocks only there is nothing to lose
    assert run(bug(zoo.Bug.DGAMMA_LAST_ROW_BLOCK), rows=12).verdict == "pass"


def test_the_partial_column_vector_is_found_by_the_period_search():
    row = run(bug(zoo.Bug.COLUMN_TAIL_NO_XHAT), hidden=100)
    assert row.diagnosis_cause == "column_tail", row.diagnosis
    assert "dx wrong only past the last multiple of 8 columns (the last 4 of 100" \
        in row.diagnosis


def test_a_padded_row_stride_is_every_row_but_the_first():
    row = run(bug(zoo.Bug.ROW_STRIDE_PADDED), hidden=100)
    assert row.diagnosis_cause == "row_stride", row.diagnosis
    assert "every row but the first" in row.diagnosis


def test_dgamma_tile_offset_is_every_32_column_tile_but_the_first():
    row = run(bug(zoo.Bug.DGAMMA_TILE_OFFSET), hidden=100)
    assert row.diagnosis_cause == "tile_offset", row.diagnosis
    assert "dgamma wrong in every 32-column tile but the first" in row.diagnosis


@pytest.mark.parametrize("b, cause, words", [
    (zoo.Bug.DOT_SHORT, "row_sum_short", "+1.00 x the last column's share"),
    (zoo.Bug.MEAN_TWICE, "mean_twice", "+1.00 x the gradients with the mean subtracted"),
    (zoo.Bug.DX_WITHOUT_GAMMA, "dx_gamma", "+1.00 x the gradients with g = dy"),
    (zoo.Bug.DBETA_SKIPS_FIRST_ROW, "dbeta_rows", "-1.00 x row 0's contribution"),
])
def test_exact_terms_name_their_cause(b, cause, words):
    row = run(bug(b))
    assert row.diagnosis_cause == cause and words in row.diagnosis, row.diagnosis


def test_the_mean_read_in_16_bits_is_the_rounded_mean_on_large_means():
    row = run(bug(zoo.Bug.MEAN_IN_INPUT_DTYPE), dtype="bfloat16", x_mean=1000.0)
    assert row.diagnosis_cause == "stats_dtype", row.diagnosis
    assert run(bug(zoo.Bug.MEAN_IN_INPUT_DTYPE), dtype="float32",
               x_mean=1000.0).verdict == "pass"


def test_large_mean_dx_errors_without_an_exact_term_are_cancellation():
    f = SPEC.diagnosis.case_features({**SPEC.params.defaults(), "x_mean": 1e5})
    wrong = dg.Evidence(frozenset({"dx"}), (), (), f)
    assert dg.candidates(SPEC.diagnosis, wrong) == ("raw_x_sums",)
    # the same errors at a zero mean name nothing: unclassified is the honest answer
    f0 = SPEC.diagnosis.case_features(SPEC.params.defaults())
    assert dg.candidates(SPEC.diagnosis, dg.Evidence(frozenset({"dx"}), (), (), f0)) == ()
    # nor does an unwritten (or NaN) dx, whatever the mean: no rounding makes those
    unwritten = dg.Evidence(frozenset({"dx"}), (), (), f, nonfinite=frozenset({"dx"}))
    assert dg.candidates(SPEC.diagnosis, unwritten) == ()


def test_spread_dgamma_noise_on_16_bit_rows_is_the_accumulator_and_in_fp32_nothing():
    def noisy(**kw):
        zoo.clean(**kw)
        g = torch.Generator().manual_seed(1)
        kw["out"]["dgamma"].add_(torch.randn(kw["out"]["dgamma"].shape, generator=g))
    row = run(noisy, dtype="bfloat16", hidden=256)
    assert row.verdict == "fail" and row.diagnosis_cause == "accumulator_dtype", \
        row.diagnosis
    row = run(noisy, hidden=256)
    assert row.verdict == "fail" and row.diagnosis.startswith("unclassified"), \
        row.diagnosis


def test_dgamma_without_the_first_row_block_is_rows_lost_not_the_accumulator():
    def first_block_lost(**kw):
        # the clean result minus the first 4 rows' dgamma and dbeta (computed alone)
        x, dy = kw["x"], kw["dy"]
        zoo.clean(**kw)
        part = {k: torch.empty_like(v) for k, v in kw["out"].items()}
        zoo.clean(**{**kw, "x": x[:4], "dy": dy[:4], "mean": kw["mean"][:4],
                     "rstd": kw["rstd"][:4], "out": {**part, "dx": part["dx"][:4]}})
        kw["out"]["dgamma"].sub_(part["dgamma"])
        kw["out"]["dbeta"].sub_(part["dbeta"])
    row = run(first_block_lost, dtype="bfloat16")
    assert row.diagnosis_cause == "rows_lost", row.diagnosis
    assert "-1.00 x the first 4 rows' contribution" in row.diagnosis
