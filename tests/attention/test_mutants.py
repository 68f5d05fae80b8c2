"""The attention mutant zoo (kernels/mutants/attention.py) and its diagnosis
(ops/attention_diagnosis.py, its float64 backward ops/attention_saved_backward.py):

1. the model without a bug equals the float64 golden on small shapes of every feature
   (alignments, windows, softcap, masks, dropout, packing, grouped heads, rows without a
   key, partial blocks), its zeros finite, and passes every ci case through the runner;
2. each bug changes what it should and nothing else, where that is cheap to state (dv
   untouched by the scale and D bugs, dq by the group sum, keys of whole blocks by the
   dropped last block; no change where the feature a bug needs is absent);
3. the float64 backward the diagnosis takes its terms from equals the golden;
4. planted on single cases, each bug gets its cause and the words of its evidence.
"""

from __future__ import annotations

from types import MappingProxyType

import pytest
import torch

from bwd_suite.golden import attention as golden
from bwd_suite.kernels.mutants import attention as zoo
from bwd_suite.ops import attention_saved_backward as sb
from bwd_suite.ops.attention_causes import BLOCK_K
from bwd_suite.suite import registry
from bwd_suite.suite.cases import Case, load_cases
from bwd_suite.suite.commands.mutants import run_zoo
from bwd_suite.suite.inputs import is_poison, poison_
from bwd_suite.suite.registry import Implementation
from bwd_suite.suite.roofline import Ceilings
from bwd_suite.suite.runner import CaseContext, RunOptions, run_item
from tests.golden_support import one_thread, rel_err, to64  # noqa: F401 - fixture

SPEC = registry.op("attention")
CPU = torch.device("cpu")
CEIL = Ceilings(device_name="cpu", copy_gbps=None, copy_source="none", peak_tflops=None)
OPTS = RunOptions(device=CPU, golden_device=CPU, repeats=1, timing=False)
Bug = zoo.Bug

# small shapes of every feature, fp32 (each with partial key and query blocks of 16)
FEATURES = {
    "causal-square": dict(seq_q=37, seq_k=37),
    "full-gqa": dict(heads=4, kv_heads=2, seq_q=21, seq_k=45, causal=False),
    "mqa-bottom-right": dict(heads=4, kv_heads=1, seq_q=21, seq_k=45, align="bottom_right"),
    "empty-rows-bottom-right": dict(seq_q=45, seq_k=21, align="bottom_right"),
    "window": dict(seq_q=33, seq_k=50, causal=False, window_left=3, window_right=5),
    "window-past-keys": dict(seq_q=50, seq_k=20, window_left=4),
    "softcap": dict(seq_q=33, seq_k=33, softcap=2.0, logit_scale=4.0),
    "bool-mask": dict(heads=4, kv_heads=2, seq_q=20, seq_k=35, mask="bool", mask_heads=4),
    "additive-mask": dict(seq_q=20, seq_k=35, mask="additive", align="bottom_right"),
    "dropout": dict(seq_q=20, seq_k=35, causal=False, dropout=0.3),
    "packed-padded": dict(batch=3, seq_q=40, seq_k=40, packing="packed_padded", segments=3),
    "bhsd-unit-scale": dict(layout="bhsd", seq_q=19, seq_k=19, softmax_scale=1.0),
}


def params(**kw) -> dict:
    small = dict(batch=2, heads=2, kv_heads=2, head_dim=8, dtype="float32")
    return {**SPEC.params.defaults(), **small, **kw}


def inputs(**kw):
    p = params(**kw)
    assert SPEC.check_case(p) is None, SPEC.check_case(p)
    return p, SPEC.make_inputs(p, 7, CPU)


def call(inp, p, bugs=frozenset()) -> dict:
    out = {k: poison_(v) for k, v in SPEC.empty_outputs(inp, p).items()}
    zoo.backward_tiled(**inp.tensors, **inp.attrs, out=out, bugs=frozenset(bugs))
    return out


def truth(inp) -> dict:
    return SPEC.golden(**{k: to64(v) for k, v in inp.tensors.items()}, **inp.attrs)


# ---------------------------------------------------------------- 1. the clean model

@pytest.mark.parametrize("name", FEATURES)
def test_the_model_without_a_bug_equals_the_golden(name):
    p, inp = inputs(**FEATURES[name])
    out, gold = call(inp, p), truth(inp)
    for o in ("dq", "dk", "dv"):
        assert bool(torch.isfinite(out[o]).all()), (o, "not finite or unwritten")
        err = rel_err(out[o].double(), gold[o])
        assert err < 2e-5, (o, err)
    # a query that sees no key has a zero gradient (not NaN, not noise)
    empty = ~sb.seen_rows(p, inp.tensors).unsqueeze(-1).expand_as(out["dq"])
    assert bool((out["dq"][empty] == 0).all())


def test_the_model_without_a_bug_passes_every_ci_case():
    impl = Implementation(op="attention", name="clean_model", fn=zoo.clean, kind="mutant")
    report = run_zoo([impl], profile="ci", device="cpu")
    (res,) = report.results
    assert res.n_items == len(load_cases(op="attention", profile="ci"))
    assert res.n_failed == 0, res.diagnosis.text


# ---------------------------------------------------------------- 2. what each bug changes

def changed(bug, **kw) -> tuple:
    """(clean, buggy) outputs of one small case."""
    p, inp = inputs(**kw)
    return call(inp, p), call(inp, p, {bug})


def same(a, b) -> bool:
    return torch.equal(a, b)


@pytest.mark.parametrize("bug", [Bug.DS_SCALE_MISSING, Bug.DS_SCALE_TWICE, Bug.D_MISSING,
                                 Bug.D_OVER_QUERIES])
def test_the_scale_and_d_bugs_leave_dv_alone(bug):
    clean, bad = changed(bug, **FEATURES["full-gqa"])
    assert same(clean["dv"], bad["dv"])
    assert not torch.allclose(clean["dq"], bad["dq"]) and \
        not torch.allclose(clean["dk"], bad["dk"])


@pytest.mark.parametrize("bug, factor", [(Bug.DS_SCALE_MISSING, lambda s: 1 / s),
                                         (Bug.DS_SCALE_TWICE, lambda s: s)])
def test_the_scale_bugs_are_a_constant_factor_and_vanish_at_scale_1(bug, factor):
    p, inp = inputs(**FEATURES["causal-square"])
    clean, bad = call(inp, p), call(inp, p, {bug})
    f = factor(inp.attrs["scale"])
    for o in ("dq", "dk"):
        torch.testing.assert_close(bad[o], clean[o] * f, rtol=1e-5, atol=1e-6)
    clean, bad = changed(bug, **FEATURES["bhsd-unit-scale"])
    assert all(same(clean[o], bad[o]) for o in clean)


def test_the_group_sum_bug_leaves_dq_and_heads_of_their_own_alone():
    clean, bad = changed(Bug.GQA_FIRST_HEAD, **FEATURES["full-gqa"])
    assert same(clean["dq"], bad["dq"])
    assert not torch.allclose(clean["dk"], bad["dk"])
    clean, bad = changed(Bug.GQA_FIRST_HEAD, **FEATURES["causal-square"])  # MHA
    assert all(same(clean[o], bad[o]) for o in clean)


def test_the_swap_moves_dk_into_dv_and_back():
    clean, bad = changed(Bug.DK_DV_SWAPPED, **FEATURES["full-gqa"])
    assert same(bad["dk"], clean["dv"]) and same(bad["dv"], clean["dk"])
    assert same(bad["dq"], clean["dq"])


def test_the_dropped_key_block_leaves_whole_blocks_alone_and_its_keys_unwritten():
    clean, bad = changed(Bug.LAST_KEY_BLOCK_DROPPED, **FEATURES["full-gqa"])  # Tk = 45
    full = 45 // BLOCK_K * BLOCK_K
    for o in ("dk", "dv"):
        assert same(bad[o][:, :, :full], clean[o][:, :, :full])
        assert bool(is_poison(bad[o][:, :, full:]).all())
    assert not torch.allclose(bad["dq"], clean["dq"])
    clean, bad = changed(Bug.LAST_KEY_BLOCK_DROPPED, **dict(FEATURES["full-gqa"], seq_k=48))
    assert all(same(clean[o], bad[o]) for o in clean)


def test_nan_rows_only_where_a_query_sees_no_key():
    p, inp = inputs(**FEATURES["empty-rows-bottom-right"])
    bad = call(inp, p, {Bug.EMPTY_ROWS_NAN})
    empty = ~sb.seen_rows(p, inp.tensors)[0, 0]  # (Tq,): the first 24 queries
    nan_rows = torch.isnan(bad["dq"]).any(-1).any(0).any(0)
    assert bool(nan_rows.any()) and bool((nan_rows <= empty).all())
    clean, bad = changed(Bug.EMPTY_ROWS_NAN, **FEATURES["causal-square"])
    assert all(same(clean[o], bad[o]) for o in clean)


@pytest.mark.parametrize("bug, needs, without", [
    (Bug.WRONG_CORNER, "mqa-bottom-right", [dict(seq_q=37, seq_k=37),
                                            dict(seq_q=21, seq_k=45, causal=False)]),
    (Bug.WINDOW_LEFT_EXCLUSIVE, "window", [dict(seq_q=33, seq_k=50, causal=False)]),
])
def test_the_visibility_bugs_need_their_feature(bug, needs, without):
    clean, bad = changed(bug, **FEATURES[needs])
    assert not all(torch.allclose(clean[o], bad[o]) for o in clean)
    for kw in without:
        clean, bad = changed(bug, **kw)
        assert all(same(clean[o], bad[o]) for o in clean), kw


def test_an_explicit_mask_is_used_alone():
    # the mask holds the whole visibility: a wrong corner or window has nothing to move
    for bug in (Bug.WRONG_CORNER, Bug.WINDOW_LEFT_EXCLUSIVE):
        clean, bad = changed(bug, **dict(FEATURES["additive-mask"], window_left=4))
        assert all(same(clean[o], bad[o]) for o in clean)


# ---------------------------------------------------------------- 3. the terms' backward

@pytest.mark.parametrize("name", ["mqa-bottom-right", "window", "softcap", "bool-mask",
                                  "additive-mask", "dropout", "packed-padded"])
def test_the_saved_statistics_backward_equals_the_golden(name):
    p, inp = inputs(**FEATURES[name])
    t64 = {k: to64(v) for k, v in inp.tensors.items()}
    gold = truth(inp)
    for recompute in (False, True):
        got = sb.saved_backward(p, t64, inp.attrs, sb.offset(p), *sb.band(p),
                                  recompute=recompute)["rows"]
        for o in gold:
            err = rel_err(got[o], gold[o])
            assert err < (1e-12 if recompute else 1e-5), (o, recompute, err)


def test_a_bug_in_the_forward_too_is_the_golden_of_the_other_visibility():
    """A two-phase implementation whose forward has the wrong corner as well: the error is
    the golden of the other corner minus the golden, a term of its own."""
    kw = FEATURES["mqa-bottom-right"]

    def both(**a):  # forward and backward of the other corner (top-left)
        q, k, v = (a[n].double() for n in ("q", "k", "v"))
        o, lse = golden.forward(q, k, v, a["scale"], a["causal"], align="top_left")
        zoo.clean(**dict(a, align="top_left", o=o.to(a["o"].dtype), lse=lse.float()))
    row = run_fn(both, **kw)
    assert row.diagnosis_cause == "causal_corner", row.diagnosis
    assert "the forward's as well" in row.diagnosis, row.diagnosis


def test_rows_without_a_key_in_closed_form():
    for kw in (FEATURES["empty-rows-bottom-right"], FEATURES["window-past-keys"],
               FEATURES["packed-padded"], FEATURES["bool-mask"]):
        p, inp = inputs(**kw)
        t64 = {k: to64(v) for k, v in inp.tensors.items()}
        seen, _ = sb.visibility(p, t64, 0, slice(0, 1), sb.offset(p), *sb.band(p))
        expect = seen.any(-1)[0]
        got = sb.seen_rows(p, inp.tensors)
        assert torch.equal(got[0, 0], expect), kw


# ---------------------------------------------------------------- 4. the diagnosis

def run_fn(fn, **kw):
    p = params(**kw)
    case = Case(op="attention", group="diag", id="attention/diag/x", tags=frozenset({"ci"}),
                params=MappingProxyType(p), seed=5, file="<test>")
    impl = Implementation(op="attention", name="planted", kind="external", fn=fn)
    return run_item(CaseContext(SPEC, case, OPTS), impl, None, CEIL, {})


def run(bug, **kw):
    return run_fn(lambda **a: zoo.backward_tiled(**a, bugs=frozenset({bug})), **kw)


@pytest.mark.parametrize("bug, kw, cause, words", [
    (Bug.DS_SCALE_MISSING, FEATURES["causal-square"], "ds_scale_missing",
     "+1.00 x dq times (1/scale - 1)"),
    (Bug.DS_SCALE_TWICE, FEATURES["causal-square"], "ds_scale_twice",
     "+1.00 x dq times (scale - 1)"),
    (Bug.D_MISSING, FEATURES["softcap"], "d_missing", "+1.00 x the D term missing"),
    (Bug.D_OVER_QUERIES, FEATURES["dropout"], "d_axis", "+1.00 x D as a column sum"),
    (Bug.DK_DV_SWAPPED, FEATURES["causal-square"], "dk_dv_swapped", "+1.00 x dk - dv"),
    (Bug.GQA_FIRST_HEAD, FEATURES["full-gqa"], "gqa_group_sum",
     "+1.00 x the other query heads' share"),
    (Bug.WRONG_CORNER, FEATURES["mqa-bottom-right"], "causal_corner",
     "+1.00 x the visibility of the other causal corner"),
    (Bug.WINDOW_LEFT_EXCLUSIVE, FEATURES["window"], "window_edge",
     "+1.00 x the window one key narrower on the left"),
])
def test_exact_terms_name_their_cause(bug, kw, cause, words):
    row = run(bug, **kw)
    assert row.verdict == "fail"
    assert row.diagnosis_cause == cause and words in row.diagnosis, row.diagnosis


def test_the_dropped_key_block_is_the_keys_past_the_last_multiple_of_16():
    row = run(Bug.LAST_KEY_BLOCK_DROPPED, **FEATURES["full-gqa"])
    assert row.diagnosis_cause == "key_block_tail", row.diagnosis
    assert "only past the last multiple of 16 keys (the last 13 of 45" in row.diagnosis


def test_nan_in_the_rows_without_a_key_is_the_missing_guard():
    row = run(Bug.EMPTY_ROWS_NAN, **FEATURES["empty-rows-bottom-right"])
    assert row.failure_kind == "non-finite output", row.reason
    assert row.diagnosis_cause == "empty_rows_nan", row.diagnosis
    assert "dq wrong" in row.diagnosis


def test_noise_everywhere_is_unclassified():
    def noisy(**kw):
        zoo.clean(**kw)
        g = torch.Generator().manual_seed(2)
        for o in ("dq", "dk", "dv"):
            kw["out"][o].add_(torch.randn(kw["out"][o].shape, generator=g))
    row = run_fn(noisy, **FEATURES["full-gqa"])
    assert row.verdict == "fail" and row.diagnosis_cause is None, row.diagnosis


def test_rows_stored_before_the_features_keep_their_features():
    # a run stored with one length `seq` and none of the feature parameters
    new = ("seq_q", "seq_k", "align", "window_left", "window_right", "softcap", "mask",
           "mask_heads", "mask_scale", "dropout")
    old = {k: v for k, v in params(seq_q=40, seq_k=40).items() if k not in new}
    old["seq"] = 40
    f = SPEC.diagnosis.case_features(old)
    assert f["seq_q"] == f["seq_k"] == 40 and not f["unequal"] and not f["windowed"]
    assert SPEC.diagnosis.shapes(old)["dk"][2] == 40


@pytest.mark.parametrize("name", ["mqa-bottom-right", "full-gqa", "bool-mask", "dropout",
                                  "packed-padded", "softcap", "additive-mask"])
def test_the_terms_backward_keeps_every_tensor_on_the_inputs_device(name):
    """On a GPU the diagnosis computes its terms beside the outputs; an index made on the
    CPU broke every attention diagnosis there (index_add_). The meta device refuses a CPU
    operand as CUDA does, so the CPU catches it."""
    p, inp = inputs(**FEATURES[name])
    t = {k: v if v is None else (to64(v) if v.is_floating_point() else v).to("meta")
         for k, v in inp.tensors.items()}
    variant = sb.Variant(kv_interleaved=True)
    for recompute in (False, True):
        got = sb.saved_backward(p, t, inp.attrs, sb.offset(p), *sb.band(p),
                                d_modes=("rows", "zero", "columns"), first_head=True,
                                recompute=recompute, variant=variant)
        assert all(x.device.type == "meta" for r in got.values() for x in r.values())
