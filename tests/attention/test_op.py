"""The attention op contract (ops/attention.py) and its eager implementations through the
runner: case validation, readable ids, the input factory (layouts, packing, the saved
forward), bytes and flops, and that a backward with a classic bug fails its check."""

from __future__ import annotations

from types import MappingProxyType

import pytest
import torch

from bwd_suite.ops import attention as op
from bwd_suite.suite import registry
from bwd_suite.suite.cases import Case
from bwd_suite.suite.registry import Implementation
from bwd_suite.suite.roofline import Ceilings
from bwd_suite.suite.runner import CaseContext, RunOptions, run_item

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
    (dict(packing="packed", seq=3, segments=4), "segments"),
])
def test_impossible_combinations_are_refused(bad, key):
    found = SPEC.check_case(params(**bad))
    assert found is not None and found[0] == key, found


def test_case_ids_are_readable():
    assert SPEC.params.case_id(params()) == "B2-H4-KV4-T128-d64-bf16-causal"
    assert SPEC.params.case_id(params(kv_heads=1, layout="bhsd", causal=False,
                                      packing="packed_padded", segments=5,
                                      dtype="float16")) == \
        "B2-H4-KV1-T128-d64-fp16-bhsd-full-packpad-s5"


@pytest.mark.parametrize("layout, order", [("bshd", (0, 2, 1, 3)), ("bhsd", (0, 1, 2, 3))])
def test_inputs_in_each_layout(layout, order):
    p = params(batch=2, heads=4, kv_heads=2, seq=9, head_dim=8, layout=layout)
    inputs = SPEC.make_inputs(p, seed=7, device=CPU)
    t = inputs.tensors
    assert t["q"].shape == t["o"].shape == t["dout"].shape == (2, 4, 9, 8)
    assert t["k"].shape == t["v"].shape == (2, 2, 9, 8)
    assert t["lse"].shape == (2, 4, 9) and t["lse"].dtype == torch.float32
    assert t["seq_idx"] is None
    for name in ("q", "k", "v", "o", "dout"):
        x = t[name]
        assert x.dtype == torch.bfloat16
        # dense in memory, fastest-moving dims as the layout orders them
        assert x.permute(order).is_contiguous(), (name, x.stride())
    assert inputs.attrs == {"causal": True, "scale": pytest.approx(8 ** -0.5, rel=1e-15)}
    out = SPEC.empty_outputs(inputs, p)
    assert all(out[n].stride() == t[n[1]].stride() for n in ("dq", "dk", "dv"))
    again = SPEC.make_inputs(p, seed=7, device=CPU).tensors  # seeded
    assert all(torch.equal(t[k], again[k]) for k in ("q", "k", "v", "o", "lse", "dout"))


def test_segment_ids_unequal_per_row_and_padded():
    p = params(batch=3, seq=40, packing="packed_padded", segments=3)
    seg = op.segment_ids(p)
    assert seg.shape == (3, 40) and seg.dtype == torch.int32
    for b, row in enumerate(seg):
        pad = 40 // 4 * (b + 1) // 3
        assert (row[40 - pad:] == -1).all() and (row[:40 - pad] >= 0).all()
        ids = row[row >= 0]
        assert (ids[1:] >= ids[:-1]).all()       # contiguous segments in order
    lengths = {tuple(int((row == s).sum()) for s in range(3)) for row in op.segment_ids(
        params(batch=3, seq=40, packing="packed", segments=3))}
    assert len(lengths) > 1                      # cut points moved between rows


def test_bytes_and_flops():
    p = params(batch=2, heads=32, kv_heads=8, seq=4096, head_dim=128)
    q, kv = 2 * 32 * 4096 * 128, 2 * 8 * 4096 * 128
    assert SPEC.bytes(p) == 2 * (4 * q + 4 * kv) + 4 * 2 * 32 * 4096
    assert SPEC.flops(p) == 10 * 128 * 32 * 2 * (4096 * 4097 // 2)
    assert SPEC.flops(dict(p, causal=False)) == 10 * 128 * 32 * 2 * 4096 ** 2
    # packed: only pairs inside a segment (and nothing for padding)
    pk = params(batch=1, seq=8, packing="packed_padded", segments=2, causal=False)
    seg = op.segment_ids(pk)[0]
    pairs = sum(int((seg == s).sum()) ** 2 for s in (0, 1))
    assert SPEC.flops(pk) == 10 * 64 * 4 * pairs


# ---------------------------------------------------------------- through the runner

def _impls() -> dict:
    return {i.name: i for i in registry.implementations("attention")}


def _run(case, impl, spec=SPEC):
    opts = RunOptions(device=CPU, golden_device=CPU, repeats=2, timing=False)
    return run_item(CaseContext(spec, case, opts), impl, None, CEIL, _impls())


def test_fp32_reference_at_least_as_accurate_as_native_in_bf16():
    case = make_case(seq=64, heads=4, kv_heads=2, head_dim=32, dtype="bfloat16")
    impls = _impls()
    rows = {n: _run(case, impls[n]) for n in ("torch_ref", "torch_fp32")}
    for name, row in rows.items():
        assert row.verdict == "pass", (name, row.reason)
        assert row.determinism == "bitwise", name
    for i in range(3):
        ref, f32 = rows["torch_ref"].outputs[i], rows["torch_fp32"].outputs[i]
        assert f32["err"] <= ref["err"] * 1.01, (ref["name"], f32["err"], ref["err"])


def _first_head_of_group(*, q, k, v, o, lse, dout, seq_idx, causal, scale, out):
    """dk, dv of a key/value head taken from the first query head of its group only."""
    impls = _impls()
    G = q.shape[1] // k.shape[1]
    full = {n: torch.empty_like(out[n]) for n in ("dq", "dk", "dv")}
    impls["torch_fp32"].fn(q=q, k=k, v=v, o=o, lse=lse, dout=dout, seq_idx=seq_idx,
                           causal=causal, scale=scale, out=full)
    kk, vv = (t.repeat_interleave(G, 1) for t in (k, v))
    per_head = {"dq": torch.empty_like(q), "dk": torch.empty_like(kk),
                "dv": torch.empty_like(vv)}
    impls["torch_fp32"].fn(q=q, k=kk, v=vv, o=o, lse=lse, dout=dout, seq_idx=seq_idx,
                           causal=causal, scale=scale, out=per_head)
    out["dq"].copy_(full["dq"])
    out["dk"].copy_(per_head["dk"][:, ::G])
    out["dv"].copy_(per_head["dv"][:, ::G])


def _causal_ignored(*, q, k, v, o, lse, dout, seq_idx, causal, scale, out):
    """the causal flag dropped: every query sees every key of its row"""
    _impls()["torch_fp32"].fn(q=q, k=k, v=v, o=o, lse=lse, dout=dout, seq_idx=seq_idx,
                           causal=False, scale=scale, out=out)


@pytest.mark.parametrize("fn, outputs_wrong", [
    (_first_head_of_group, {"dk", "dv"}),
    (_causal_ignored, {"dq", "dk", "dv"}),
])
def test_a_classic_bug_fails(fn, outputs_wrong):
    impl = Implementation(op="attention", name="buggy", fn=fn)
    row = _run(make_case(seq=33, heads=4, kv_heads=2, head_dim=16), impl)
    assert row.verdict == "fail", row.reason
    assert {o["name"] for o in row.outputs if o["err"] > o["allowed"]} == outputs_wrong


# A case the fuzzer found (CPU, PyTorch's flash kernel in bf16): o's rounding moves dq by
# 0.17 of its maximum, so the truth is ambiguous by it (OpSpec.alternate_golden).
O_ROUNDING_CASE = dict(batch=1, heads=2, kv_heads=1, seq=5, head_dim=15, dtype="bfloat16",
                       packing="packed_padded", segments=2, softmax_scale=1.0)


def _d_from_saved_o(*, q, k, v, o, lse, dout, seq_idx, causal, scale, out):
    """FlashAttention's convention, otherwise exact: D from the saved o, rounded once"""
    from bwd_suite.golden import attention as golden
    g = golden.backward(q, k, v, dout, scale, causal, seq_idx, o=o)
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
