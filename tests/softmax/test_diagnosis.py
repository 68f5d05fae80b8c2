"""The softmax diagnosis (ops/softmax_diagnosis.py): the mutants' bugs planted one at a
time into the fused fp32 model (kernels/mutants/softmax.py) on single cases, and the words
and cause of each failing item."""

from types import MappingProxyType

import pytest
import torch

from bwd_suite.kernels.mutants import softmax as zoo
from bwd_suite.suite import registry
from bwd_suite.suite.cases import Case
from bwd_suite.suite.registry import Implementation
from bwd_suite.suite.roofline import Ceilings
from bwd_suite.suite.runner import CaseContext, RunOptions, run_item

SPEC = registry.op("softmax")
CPU = torch.device("cpu")
CEIL = Ceilings(device_name="cpu", copy_gbps=None, copy_source="none", peak_tflops=None)
OPTS = RunOptions(device=CPU, golden_device=CPU, repeats=1, timing=False)
DROP = {"dropout": True, "p": 0.1}


def run(fn, **params):
    p = {**SPEC.params.defaults(), "rows": 13, "length": 100, "dtype": "float32", **params}
    case = Case(op="softmax", group="diag", id="softmax/diag/x", tags=frozenset({"ci"}),
                params=MappingProxyType(p), seed=5, file="<test>")
    impl = Implementation(op="softmax", name="planted", fn=fn, kind="external")
    return run_item(CaseContext(SPEC, case, OPTS), impl, None, CEIL, {})


def bug(b):
    return lambda **kw: zoo.backward_fused(**kw, bugs=frozenset({b}))


@pytest.mark.parametrize("params", [{}, {"dtype": "bfloat16", "length": 33}, DROP,
                                    {**DROP, "mask": "all_dropped_rows", "length": 2049}])
def test_the_model_without_a_bug_passes(params):
    row = run(zoo.clean, **params)
    assert row.verdict == "pass", row.reason


@pytest.mark.parametrize("mutant", zoo.ALL, ids=lambda f: f.__name__)
def test_every_mutant_registers_as_a_mutant_with_a_cause_of_the_table(mutant):
    impl = mutant.implementation
    assert impl.kind == "mutant" and impl.op == "softmax"
    assert SPEC.diagnosis.cause_spec(mutant.planted_cause) is not None
    assert "Symptom:" in mutant.__doc__


@pytest.mark.parametrize("b, cause, words", [
    (zoo.Bug.SCALE_TWICE, "dropout_scale_twice", "+1.00 x the gradient times (scale - 1)"),
    (zoo.Bug.SCALE_MISSING, "dropout_scale_missing", "+1.00 x the gradient times (1/scale"),
    (zoo.Bug.MASK_INVERTED, "mask_inverted", "+1.00 x the gradient with the keep mask"),
    (zoo.Bug.MASK_NOT_IN_DOT, "dot_mask", "+1.00 x the dropped elements' share"),
    (zoo.Bug.DOT_SHORT, "dot_short", "+1.00 x the last column's share of the row dot"),
])
def test_exact_terms_name_their_cause(b, cause, words):
    row = run(bug(b), **DROP)
    assert row.diagnosis_cause == cause and words in row.diagnosis, row.diagnosis


def test_the_scale_bugs_cannot_show_without_dropout():
    assert run(bug(zoo.Bug.SCALE_TWICE)).verdict == "pass"
    assert run(bug(zoo.Bug.SCALE_TWICE), dropout=True, p=0.0).verdict == "pass"


def test_the_partial_vector_is_the_columns_past_the_last_multiple_of_8():
    row = run(bug(zoo.Bug.COLUMN_TAIL_NO_DOT), length=100)
    assert row.diagnosis_cause == "column_tail", row.diagnosis
    assert "dx wrong only past the last multiple of 8 columns (the last 4 of 100" \
        in row.diagnosis
    assert run(bug(zoo.Bug.COLUMN_TAIL_NO_DOT), length=96).verdict == "pass"


def test_a_padded_row_stride_is_every_row_but_the_first():
    row = run(bug(zoo.Bug.ROW_STRIDE_PADDED), length=100)
    assert row.diagnosis_cause == "row_stride", row.diagnosis
    assert "dx wrong in every row but the first" in row.diagnosis


def test_the_tile_offset_is_every_1024_column_tile_but_the_first():
    row = run(bug(zoo.Bug.TILE_OFFSET), rows=3, length=2049)
    assert row.diagnosis_cause == "tile_offset", row.diagnosis
    assert "dx wrong in every 1024-column tile but the first" in row.diagnosis


def test_a_shared_dot_in_4_row_blocks_is_fixed_rows_of_each_block():
    row = run(bug(zoo.Bug.ROW_GROUP_SHARED_DOT), rows=13)
    assert row.diagnosis_cause == "tile_position", row.diagnosis
    assert "dx wrong in the last 3 rows of each 4-row tile" in row.diagnosis


def test_the_last_row_unwritten_is_the_last_index():
    row = run(bug(zoo.Bug.LAST_ROW_NOT_WRITTEN))
    assert row.failure_kind == "unwritten output"
    assert row.diagnosis_cause == "last_index"
    assert "dx wrong only in the last row (row 12 of 13)" in row.diagnosis


def test_noise_everywhere_is_unclassified():
    def noisy(**kw):
        zoo.clean(**kw)
        g = torch.Generator().manual_seed(2)
        kw["out"]["dx"].add_(torch.randn(kw["out"]["dx"].shape, generator=g))
    row = run(noisy)
    assert row.verdict == "fail" and row.diagnosis_cause is None
    assert row.diagnosis.startswith("unclassified: dx wrong at"), row.diagnosis


def test_any_constant_factor_is_a_scale_applied_wrong():
    # 1 - p in place of 1/(1-p): neither twice nor missing, but dx times a constant
    def times_one_minus_p_squared(**kw):
        zoo.clean(**kw)
        kw["out"]["dx"].mul_(0.9 * 0.9)
    row = run(times_one_minus_p_squared, **DROP)
    assert row.diagnosis_cause == "dx_scaled", row.diagnosis
    # the planted scale bugs keep their own names (the constant fits them as well)
    assert run(bug(zoo.Bug.SCALE_TWICE), **DROP).diagnosis_cause == "dropout_scale_twice"
