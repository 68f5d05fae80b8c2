"""The attention op contract (ops/attention.py) and its eager implementations through the
runner: case validation and bad case files (exit 2, one line naming file and key),
readable ids, the input factory (layouts, packing, explicit masks, the dropout keep mask,
the saved forward), bytes, flops and memory bounds, and that a backward with a classic
bug fails its check (a NaN where the golden is 0 included)."""

from __future__ import annotations

import math
from types import MappingProxyType

import pytest
import torch

from bwd_suite.golden import attention as golden
from bwd_suite.kernels.attention import masks
from bwd_suite.ops import attention as op
from bwd_suite.suite import registry
from bwd_suite.suite.cases import Case
from bwd_suite.suite.registry import Implementation
from bwd_suite.suite.roofline import Ceilings
from bwd_suite.suite.runner import CaseContext, RunOptions, run_item
from bwd_suite.suite.verdicts import FailureKind
from tests.bad_input import assert_one_line_naming_file_and_key

SPEC = registry.op("attention")
CPU = torch.device("cpu")
CEIL = Ceilings(device_name="cpu", copy_gbps=None, copy_source="none", peak_tflops=None)


def params(**kw) -> dict:
    return dict(SPEC.params.defaults(), **kw)


def make_case(seed=1234, **kw) -> Case:
    return Case(op="attention", group="t", id="attention/t/x", tags=frozenset({"ci"}),
                params=MappingProxyType(params(**kw)), seed=seed, file="<test>")


@pytest.mark.parametrize("bad, key", [
    (dict(heads=4, kv_heads=3), "kv_heads"),        # does not divide
    (dict(segments=2), "segments"),                 # no effect without packing
    (dict(packing="packed", seq_q=3, seq_k=3, segments=4), "segments"),
    (dict(packing="packed", seq_q=8, seq_k=9), "packing"),  # packing needs Tq == Tk
    (dict(seq_k=16, window_left=17), "window_left"),   # a window larger than the keys
    (dict(seq_k=16, causal=False, window_right=20), "window_right"),
    (dict(window_right=0), "window_right"),          # causal already says right = 0
    (dict(mask="bool", mask_heads=3), "mask_heads"),  # a mask of the wrong shape
    (dict(mask_heads=4), "mask_heads"),              # no mask
    (dict(mask_scale=3.0), "mask_scale"),
    (dict(mask="bool", mask_scale=3.0), "mask_scale"),
    (dict(dropout=1.0), "dropout"),
])
def test_impossible_combinations_are_refused(bad, key):
    found = SPEC.check_case(params(**bad))
    assert found is not None and found[0] == key, found


def test_windows_up_to_the_keys_and_a_mask_of_every_head_are_valid():
    for ok in (dict(seq_k=16, window_left=16), dict(seq_k=16, causal=False, window_right=16),
               dict(mask="additive", heads=4, mask_heads=4, mask_scale=3.0),
               dict(align="bottom_right", seq_q=3, seq_k=799), dict(dropout=0.9)):
        assert SPEC.check_case(params(**ok)) is None, ok


@pytest.mark.parametrize("line, key, says", [
    ("heads = 4\nkv_heads = 3", "kv_heads", "do not divide 4 heads"),
    ("seq_k = 16\nwindow_left = 17", "window_left", "larger than the 16 keys"),
    ("seq_k = 16\ncausal = false\nwindow_right = 17", "window_right", "larger than the 16 keys"),
    ('mask = "additive"\nmask_heads = 2', "mask_heads", "does not fit 4 heads"),
    ("seq_q = 0", "seq_q", "below the minimum"),
    ("seq_k = 0", "seq_k", "below the minimum"),
    ('packing = "packed"\nseq_q = 8\nseq_k = 9', "packing", "seq_q == seq_k"),
], ids=["kv-heads", "window-left", "window-right", "mask-shape", "no-queries", "no-keys",
        "packed-lengths"])
def test_bad_input_is_one_line_naming_file_and_key(tmp_path, capsys, line, key, says):
    assert_one_line_naming_file_and_key(
        tmp_path, capsys, f'op = "attention"\n[defaults]\nheads = 4\nseq_q = 8\nseq_k = 8\n'
                          f'[[case]]\nname = "c"\ntags = ["ci"]\n{line}\n',
        key, says)


def test_case_ids_are_readable():
    assert SPEC.params.case_id(params()) == "B2-H4-KV4-T128-d64-bf16-causal"
    assert SPEC.params.case_id(params(kv_heads=1, layout="bhsd", causal=False,
                                      packing="packed_padded", segments=5,
                                      dtype="float16")) == \
        "B2-H4-KV1-T128-d64-fp16-bhsd-full-packpad-s5"
    assert SPEC.params.case_id(params(seq_q=3, seq_k=799, align="bottom_right",
                                      window_left=32, softcap=50.0, mask="additive",
                                      mask_heads=4, mask_scale=30.0, dropout=0.17)) == \
        "B2-H4-KV4-Tq3-Tk799-d64-bf16-causal-br-wl32-cap50.0-amask-mh4-ms30.0-drop0.17"
    assert SPEC.params.case_id(params(causal=False, window_left=0, window_right=5,
                                      mask="bool")) == \
        "B2-H4-KV4-T128-d64-bf16-full-wl0-wr5-bmask"
    # the joint length token never swallows a longer one
    assert "-Tq12-Tk123-" in SPEC.params.case_id(params(seq_q=12, seq_k=123))


@pytest.mark.parametrize("layout, order", [("bshd", (0, 2, 1, 3)), ("bhsd", (0, 1, 2, 3))])
def test_inputs_in_each_layout(layout, order):
    p = params(batch=2, heads=4, kv_heads=2, seq_q=9, seq_k=13, head_dim=8, layout=layout)
    inputs = SPEC.make_inputs(p, seed=7, device=CPU)
    t = inputs.tensors
    assert t["q"].shape == t["o"].shape == t["dout"].shape == (2, 4, 9, 8)
    assert t["k"].shape == t["v"].shape == (2, 2, 13, 8)
    assert t["lse"].shape == (2, 4, 9) and t["lse"].dtype == torch.float32
    assert t["seq_idx"] is None and t["attn_mask"] is None and t["dropout_mask"] is None
    for name in ("q", "k", "v", "o", "dout"):
        x = t[name]
        assert x.dtype == torch.bfloat16
        # dense in memory, fastest-moving dims as the layout orders them
        assert x.permute(order).is_contiguous(), (name, x.stride())
    assert inputs.attrs == {"causal": True, "align": "top_left", "window_left": -1,
                            "window_right": -1, "softcap": 0.0,
                            "scale": pytest.approx(8 ** -0.5, rel=1e-15), "dropout": 0.0}
    out = SPEC.empty_outputs(inputs, p)
    assert all(out[n].stride() == t[n[1]].stride() for n in ("dq", "dk", "dv"))
    again = SPEC.make_inputs(p, seed=7, device=CPU).tensors  # seeded
    assert all(torch.equal(t[k], again[k]) for k in ("q", "k", "v", "o", "lse", "dout"))


def _rules(p) -> torch.Tensor:
    """(B, 1, Tq, Tk) from the implementations' builder, never the golden's."""
    seq_idx = op.segment_ids(p) if p["packing"] != "none" else None
    return masks.keep(seq_idx, p["causal"], p["seq_q"], p["seq_k"], CPU, align=p["align"],
                      window_left=p["window_left"], window_right=p["window_right"])


MASKED = [
    dict(seq_q=13, seq_k=40, align="bottom_right", mask="bool"),
    dict(seq_q=40, seq_k=13, window_left=3, mask="additive", mask_scale=2.0),
    dict(seq_q=24, seq_k=24, causal=False, window_left=2, window_right=4, mask="bool",
         mask_heads=4, packing="packed_padded", segments=2),
]


@pytest.mark.parametrize("kw", MASKED, ids=["bool", "additive", "bool-per-head-packed"])
def test_an_explicit_mask_holds_the_whole_visibility(kw):
    p = params(batch=2, heads=4, kv_heads=2, head_dim=8, dtype="float16", **kw)
    t = SPEC.make_inputs(p, seed=5, device=CPU).tensors
    m = t["attn_mask"]
    assert m.shape == (2, p["mask_heads"], p["seq_q"], p["seq_k"]) and m.is_contiguous()
    rules = _rules(p).expand_as(m)
    if p["mask"] == "bool":
        assert m.dtype == torch.bool
        assert not (m & ~rules).any()                      # nothing the rules hide
        hidden = (rules & ~m).sum() / rules.sum()          # about one pair in ten
        assert 0.04 < float(hidden) < 0.2, float(hidden)
    else:
        assert m.dtype == torch.float16
        assert torch.equal(torch.isfinite(m), rules)        # -inf exactly where not seen
        assert bool((m[rules] != 0).any())


def test_the_dropout_keep_mask_is_seeded_and_keeps_one_minus_p():
    p = params(batch=2, heads=4, kv_heads=2, seq_q=64, seq_k=80, head_dim=8, dropout=0.17)
    inputs = SPEC.make_inputs(p, seed=9, device=CPU)
    z = inputs.tensors["dropout_mask"]
    assert z.shape == (2, 4, 64, 80) and z.dtype == torch.bool and z.is_contiguous()
    assert abs(float(z.float().mean()) - 0.83) < 0.02
    assert inputs.attrs["dropout"] == 0.17
    assert torch.equal(z, SPEC.make_inputs(p, seed=9, device=CPU).tensors["dropout_mask"])
    assert not torch.equal(z, SPEC.make_inputs(p, seed=10, device=CPU).tensors["dropout_mask"])


def test_segment_ids_unequal_per_row_and_padded():
    p = params(batch=3, seq_q=40, seq_k=40, packing="packed_padded", segments=3)
    seg = op.segment_ids(p)
    assert seg.shape == (3, 40) and seg.dtype == torch.int32
    for b, row in enumerate(seg):
        pad = 40 // 4 * (b + 1) // 3
        assert (row[40 - pad:] == -1).all() and (row[:40 - pad] >= 0).all()
        ids = row[row >= 0]
        assert (ids[1:] >= ids[:-1]).all()       # contiguous segments in order
    lengths = {tuple(int((row == s).sum()) for s in range(3)) for row in op.segment_ids(
        params(batch=3, seq_q=40, seq_k=40, packing="packed", segments=3))}
    assert len(lengths) > 1                      # cut points moved between rows


# ---------------------------------------------------------------- bytes, flops, memory

def test_bytes_and_flops():
    p = params(batch=2, heads=32, kv_heads=8, seq_q=4096, seq_k=4096, head_dim=128)
    q, kv = 2 * 32 * 4096 * 128, 2 * 8 * 4096 * 128
    assert SPEC.bytes(p) == 2 * (4 * q + 4 * kv) + 4 * 2 * 32 * 4096
    assert SPEC.flops(p) == 10 * 128 * 32 * 2 * (4096 * 4097 // 2)
    assert SPEC.flops(dict(p, causal=False)) == 10 * 128 * 32 * 2 * 4096 ** 2
    # packed: only pairs inside a segment (and nothing for padding)
    pk = params(batch=1, seq_q=8, seq_k=8, packing="packed_padded", segments=2, causal=False)
    seg = op.segment_ids(pk)[0]
    pairs = sum(int((seg == s).sum()) ** 2 for s in (0, 1))
    assert SPEC.flops(pk) == 10 * 64 * 4 * pairs
    # bottom-right with fewer queries: query i sees Tk - Tq + i + 1 keys
    br = params(batch=1, heads=1, kv_heads=1, seq_q=3, seq_k=799, align="bottom_right")
    assert SPEC.flops(br) == 10 * 64 * (797 + 798 + 799)
    tl = dict(br, align="top_left")
    assert SPEC.flops(tl) == 10 * 64 * (1 + 2 + 3)


def test_long_context_counts_in_closed_form():
    p = params(batch=1, heads=32, kv_heads=8, seq_q=32768, seq_k=32768, head_dim=128)
    assert SPEC.flops(p) == 10 * 128 * 32 * (32768 * 32769 // 2)
    w = dict(p, window_left=1023)  # each query sees min(i + 1, 1024) keys
    assert op.visible_pairs(w) == 32 * (1024 * 1025 // 2 + (32768 - 1024) * 1024)


SHAPES = [
    dict(seq_q=17, seq_k=5, align="bottom_right"),
    dict(seq_q=5, seq_k=17, align="bottom_right", window_left=2),
    dict(seq_q=30, seq_k=11, window_left=3),
    dict(seq_q=12, seq_k=19, causal=False, window_left=1, window_right=6, align="bottom_right"),
    dict(seq_q=21, seq_k=21, causal=False, packing="packed_padded", segments=3,
         window_right=2),
    dict(seq_q=21, seq_k=21, packing="packed", segments=4, window_left=5),
    dict(seq_q=33, seq_k=47, mask="bool", align="bottom_right"),
    dict(seq_q=33, seq_k=33, mask="bool", mask_heads=4, packing="packed_padded"),
    dict(seq_q=9, seq_k=14, mask="additive", window_left=3, dropout=0.3),
]


@pytest.mark.parametrize("kw", SHAPES, ids=[str(i) for i in range(len(SHAPES))])
def test_visible_pairs_equal_a_count_of_the_masks(kw):
    p = params(batch=3, heads=4, kv_heads=2, head_dim=8, **kw)
    t = SPEC.make_inputs(p, seed=1, device=CPU).tensors
    seen = golden.visible(t["seq_idx"], p["seq_q"], p["seq_k"], p["causal"], CPU,
                          align=p["align"], window=op.window(p)).expand(3, 4, -1, -1)
    if t["attn_mask"] is not None:
        m = t["attn_mask"]
        seen = seen & (m if m.dtype == torch.bool else torch.isfinite(m))
    assert op.visible_pairs(p) == int(seen.sum())
    assert SPEC.flops(p) == 10 * 8 * int(seen.sum())
    es = 2
    extra = 4 * 3 * p["seq_q"] if p["packing"] != "none" else 0
    if p["mask"] != "none":
        extra += (1 if p["mask"] == "bool" else es) * t["attn_mask"].numel()
    if p["dropout"]:
        extra += int(seen.sum())
    base = es * 4 * (t["q"].numel() + t["k"].numel()) + 4 * t["lse"].numel()
    assert SPEC.bytes(p) == base + extra


def test_memory_bounds_follow_seed_002():
    # the seed's worked example: B 4, L 2048, hidden 4096 in 32 heads, 16-bit:
    # BLH = 64 MiB, BL²N = 1024 MiB, bound 3 x 64 + max(1024, 192) = 1216 MiB
    p = params(batch=4, heads=32, kv_heads=32, seq_q=2048, seq_k=2048, head_dim=128,
               dtype="float16")
    b = op.memory_bounds(p)
    assert b["materialised"] == 1216 * 2 ** 20
    blh = 4 * 2048 * 4096
    assert b["fused"] == 2 * 3 * blh + 8 * 4 * 32 * 2048
    # short rows: the q-sized tensors dominate (L < 3 d)
    s = op.memory_bounds(params(batch=1, heads=2, kv_heads=1, seq_q=64, seq_k=64,
                                head_dim=128, dtype="float32"))
    assert s["materialised"] == 4 * 6 * 64 * 2 * 128
    assert s["fused"] == 4 * (64 * 2 * 128 + 2 * 64 * 128) + 8 * 2 * 64


def test_golden_workspace_stays_bounded_at_long_context():
    long = params(batch=1, heads=32, kv_heads=8, seq_q=32768, seq_k=32768, head_dim=128)
    assert SPEC.golden_workspace(long) < 2 ** 30      # not 32768² float64 (8 GiB) a head
    assert SPEC.golden_workspace(params()) == 12 * 8 * 128 * 128 + 2 * 128 * 128


def test_fuzz_bounds_count_the_bias_and_the_cap():
    bounds = SPEC.params.fuzz_bounds
    big_bias = params(dtype="float32", mask="additive", mask_scale=40.0)
    assert bounds(big_bias, "cpu")[0] == "mask_scale"
    assert bounds(dict(big_bias, softcap=20.0), "cpu") is None  # the cap bounds the scores
    assert bounds(params(dtype="bfloat16", logit_scale=30.0), "cpu")[0] == "logit_scale"
    # a cap far below the scores: tanh saturates and the gradient vanishes (fuzzed
    # torch_ref: dq 0 against 1e-18 at a cap of 0.0034 on scores of 0.12)
    tiny_cap = params(dtype="bfloat16", head_dim=1, softmax_scale=0.12, softcap=0.0034)
    assert bounds(tiny_cap, "cpu")[0] == "softcap"
    assert bounds(dict(tiny_cap, softcap=0.02), "cpu") is None


# ---------------------------------------------------------------- through the runner

def _impls() -> dict:
    return {i.name: i for i in registry.implementations("attention")}


def _run(case, impl, spec=SPEC):
    opts = RunOptions(device=CPU, golden_device=CPU, repeats=2, timing=False)
    return run_item(CaseContext(spec, case, opts), impl, None, CEIL, _impls())


def test_fp32_reference_at_least_as_accurate_as_native_in_bf16():
    case = make_case(seq_q=64, seq_k=64, heads=4, kv_heads=2, head_dim=32, dtype="bfloat16")
    impls = _impls()
    rows = {n: _run(case, impls[n]) for n in ("torch_ref", "torch_fp32")}
    for name, row in rows.items():
        assert row.verdict == "pass", (name, row.reason)
        assert row.determinism == "bitwise", name
    for i in range(3):
        ref, f32 = rows["torch_ref"].outputs[i], rows["torch_fp32"].outputs[i]
        assert f32["err"] <= ref["err"] * 1.01, (ref["name"], f32["err"], ref["err"])


def _fp32(**kw):
    _impls()["torch_fp32"].fn(**kw)


def _first_head_of_group(*, q, k, v, out, **kw):
    """dk, dv of a key/value head taken from the first query head of its group only."""
    G = q.shape[1] // k.shape[1]
    full = {n: torch.empty_like(out[n]) for n in ("dq", "dk", "dv")}
    _fp32(q=q, k=k, v=v, out=full, **kw)
    kk, vv = (t.repeat_interleave(G, 1) for t in (k, v))
    per_head = {"dq": torch.empty_like(q), "dk": torch.empty_like(kk),
                "dv": torch.empty_like(vv)}
    _fp32(q=q, k=kk, v=vv, out=per_head, **kw)
    out["dq"].copy_(full["dq"])
    out["dk"].copy_(per_head["dk"][:, ::G])
    out["dv"].copy_(per_head["dv"][:, ::G])


def _causal_ignored(**kw):
    """the causal flag dropped: every query sees every key of its row"""
    _fp32(**dict(kw, causal=False))


def _wrong_corner(**kw):
    """the causal mask aligned to the other corner"""
    _fp32(**dict(kw, align="top_left" if kw["align"] == "bottom_right" else "bottom_right"))


def _nan_on_empty_rows(**kw):
    """right everywhere, but NaN on the rows that see no key (as an unguarded softmax)"""
    _fp32(**kw)
    empty = torch.isinf(kw["lse"])  # (B, H, Tq)
    kw["out"]["dq"][empty] = float("nan")


@pytest.mark.parametrize("fn, case, outputs_wrong", [
    (_first_head_of_group, dict(seq_q=33, seq_k=33), {"dk", "dv"}),
    (_causal_ignored, dict(seq_q=33, seq_k=33), {"dq", "dk", "dv"}),
    (_wrong_corner, dict(seq_q=20, seq_k=33, align="bottom_right"), {"dq", "dk", "dv"}),
    (_nan_on_empty_rows, dict(seq_q=40, seq_k=10, align="bottom_right"), {"dq"}),
], ids=["group-sum", "causal-ignored", "wrong-corner", "nan-empty-rows"])
def test_a_classic_bug_fails(fn, case, outputs_wrong):
    impl = Implementation(op="attention", name="buggy", fn=fn)
    row = _run(make_case(heads=4, kv_heads=2, head_dim=16, dtype="float32", **case), impl)
    assert row.verdict == "fail", row.reason
    assert {o["name"] for o in row.outputs if o["err"] > o["allowed"]
            or o["n_nonfinite"]} == outputs_wrong


def test_a_nan_where_the_golden_is_zero_is_a_failure():
    impl = Implementation(op="attention", name="nan_rows", fn=_nan_on_empty_rows)
    row = _run(make_case(heads=4, kv_heads=2, head_dim=16, seq_q=40, seq_k=10,
                         align="bottom_right"), impl)
    assert row.verdict == "fail" and row.failure_kind == FailureKind.NONFINITE, row.reason
    assert "NaN" in row.reason and "dq" in row.reason


# A case the fuzzer found (CPU, PyTorch's flash kernel in bf16): o's rounding moves dq by
# 0.17 of its maximum, so the truth is ambiguous by it (OpSpec.alternate_golden).
O_ROUNDING_CASE = dict(batch=1, heads=2, kv_heads=1, seq_q=5, seq_k=5, head_dim=15,
                       dtype="bfloat16", packing="packed_padded", segments=2,
                       softmax_scale=1.0)


def _d_from_saved_o(*, q, k, v, o, lse, dout, seq_idx, attn_mask, dropout_mask, causal,
                    align, window_left, window_right, softcap, scale, dropout, out):
    """FlashAttention's convention, otherwise exact: D from the saved o, rounded once"""
    g = golden.backward(q, k, v, dout, scale, causal, seq_idx, o=o, align=align,
                        window=(window_left, window_right), softcap=softcap,
                        attn_mask=attn_mask, dropout_mask=dropout_mask, dropout=dropout)
    for name in ("dq", "dk", "dv"):
        out[name].copy_(g[name])


def test_d_from_the_saved_o_passes_only_through_the_alternate_golden():
    import dataclasses
    case = make_case(seed=732174384, **O_ROUNDING_CASE)
    impl = Implementation(op="attention", name="fa_convention", fn=_d_from_saved_o)
    row = _run(case, impl)
    assert row.verdict == "pass", row.reason
    dq = next(o for o in row.outputs if o["name"] == "dq")
    assert dq["err"] > 0.1  # that far from the exact gradient, and still right
    one_truth = dataclasses.replace(SPEC, alternate_golden=None)
    assert _run(case, impl, spec=one_truth).verdict == "fail"
    # the exact-D implementations pass as well
    assert _run(case, _impls()["torch_ref"]).verdict == "pass"


# ---------------------------------------------------------------- the case files

CI_NEEDS = {
    "Tq < Tk, bottom-right": lambda p: p["seq_q"] < p["seq_k"] and p["align"] == "bottom_right",
    "Tq > Tk, bottom-right (empty rows)": lambda p: p["seq_q"] > p["seq_k"]
    and p["align"] == "bottom_right" and p["causal"],
    "Tq > Tk, top-left": lambda p: p["seq_q"] > p["seq_k"] and p["align"] == "top_left",
    "a left window": lambda p: p["window_left"] >= 0,
    "a right window": lambda p: p["window_right"] >= 0,
    "softcap": lambda p: p["softcap"] > 0,
    "a boolean mask per head": lambda p: p["mask"] == "bool" and p["mask_heads"] > 1,
    "an additive mask": lambda p: p["mask"] == "additive",
    "large additive biases": lambda p: p["mask"] == "additive" and p["mask_scale"] >= 10,
    "dropout": lambda p: p["dropout"] > 0,
    "packed padding": lambda p: p["packing"] == "packed_padded",
    "MQA": lambda p: p["kv_heads"] == 1 and p["heads"] > 1,
    "GQA": lambda p: 1 < p["kv_heads"] < p["heads"],
    "bhsd": lambda p: p["layout"] == "bhsd",
    "(1023, 1024)": lambda p: (p["seq_q"], p["seq_k"]) == (1023, 1024),
    "(1024, 1023)": lambda p: (p["seq_q"], p["seq_k"]) == (1024, 1023),
    **{f"({q}, {k})": (lambda q, k: lambda p: (p["seq_q"], p["seq_k"]) == (q, k))(q, k)
       for q, k in ((1, 239), (3, 799), (127, 513), (113, 203))},
    **{dt: (lambda dt: lambda p: p["dtype"] == dt)(dt)
       for dt in ("float32", "float16", "bfloat16")},
}
HEAD_DIMS = (32, 40, 59, 64, 80, 96, 111, 128, 160, 192, 224, 256)


def test_the_ci_profile_holds_every_feature():
    from bwd_suite.suite.cases import load_cases
    cases = [c.params for c in load_cases(op="attention", profile="ci")]
    missing = [what for what, has in CI_NEEDS.items() if not any(has(p) for p in cases)]
    assert not missing, missing


def test_the_gpu_profile_holds_every_head_dim_and_tile_edge():
    from bwd_suite.suite.cases import load_cases
    cases = [c.params for c in load_cases(op="attention", profile="gpu")]
    assert {d for d in HEAD_DIMS if any(p["head_dim"] == d for p in cases)} == set(HEAD_DIMS)
    for n in (63, 64, 65, 127, 128, 129, 255, 256, 257, 1023, 1024, 1025):
        assert any(p["seq_q"] == n for p in cases) and any(p["seq_k"] == n for p in cases), n
    assert len(cases) < 400  # a few hundred items an implementation


def test_the_perf_profile_holds_the_benchmark_shapes():
    from bwd_suite.suite.cases import load_cases
    shapes = {(p["batch"], p["seq_q"], p["heads"], p["kv_heads"], p["head_dim"], p["causal"])
              for p in (c.params for c in load_cases(op="attention", profile="perf"))}
    for causal in (True, False):
        assert {(4, 4096, 32, 8, 128, causal), (2, 8192, 32, 8, 128, causal),
                (1, 32768, 32, 8, 128, causal)} <= shapes
    assert {(8, 1024, 12, 12, 64, True), (8, 1024, 25, 25, 64, True)} <= shapes
