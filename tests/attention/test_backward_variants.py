"""The attention diagnosis's stories of a backward computed otherwise than the golden
(ops/attention_diagnosis.py: Variant), each named for a wrong gradient that has it.

The wrong gradients come from a plain float64 backward written here (`backward`), one
knob a bug, not from the diagnosis's own code: query heads read key/value heads by
modulo; the softcap derivative at the capped score; the scores formed in the input
dtype; padding tokens seeing each other; rows that see no key given uniform weights
(a fully masked row's softmax taken over all keys). Without its knob each equals the
golden (the first test), so what the diagnosis names is the knob.
"""

from __future__ import annotations

from types import MappingProxyType

import pytest
import torch

from bwd_suite.golden import attention as golden
from bwd_suite.ops import attention_diagnosis as diag
from bwd_suite.suite import registry
from bwd_suite.suite.cases import Case
from bwd_suite.suite.registry import Implementation
from bwd_suite.suite.roofline import Ceilings
from bwd_suite.suite.runner import CaseContext, RunOptions, run_item
from tests.golden_support import one_thread  # noqa: F401 - fixture

SPEC = registry.op("attention")
CPU = torch.device("cpu")
CEIL = Ceilings(device_name="cpu", copy_gbps=None, copy_source="none", peak_tflops=None)
OPTS = RunOptions(device=CPU, golden_device=CPU, repeats=1, timing=False)
F64 = torch.float64


def backward(*, q, k, v, o, lse, dout, seq_idx, attn_mask, dropout_mask, causal, align,
             window_left, window_right, softcap, scale, dropout, out, kv_modulo=False,
             softcap_at_capped=False, scores_in_dtype=False, padding_sees_padding=False,
             empty_rows_uniform=False):
    """dq, dk, dv in float64 per (batch, query head), written into `out`; no explicit
    mask, no dropout (the cases below have neither)."""
    assert attn_mask is None and dropout == 0
    B, H, Tq, _ = q.shape
    Hkv, Tk = k.shape[1], k.shape[2]
    dq, dk, dv = (torch.zeros(t.shape, dtype=F64) for t in (q, k, v))
    for b in range(B):
        for h in range(H):
            g = h % Hkv if kv_modulo else h // (H // Hkv)
            qh, kh, vh, do = (t.to(F64) for t in (q[b, h], k[b, g], v[b, g], dout[b, h]))
            s0 = ((q[b, h] @ k[b, g].T) * scale).to(F64) if scores_in_dtype \
                else scale * qh @ kh.T
            s = softcap * torch.tanh(s0 / softcap) if softcap else s0
            seen = golden.visible(None, Tq, Tk, causal, CPU, align=align,
                                  window=(window_left, window_right))[0, 0]
            if seq_idx is not None:
                seg = seq_idx[b].long()
                same = seg[:, None] == seg[None, :]
                seen = seen & (same if padding_sees_padding else same & (seg[:, None] >= 0))
            empty = ~seen.any(-1, keepdim=True)
            if empty_rows_uniform:  # a fully masked row's softmax over every key
                seen = seen | empty
            p = torch.softmax(s.masked_fill(~seen, float("-inf")), -1).nan_to_num(0.0)
            dv[b, g] += p.T @ do
            dp = do @ vh.T
            ds = p * (dp - (p * dp).sum(-1, keepdim=True))
            if softcap:
                at = s if softcap_at_capped else s0 / softcap
                ds = ds * (1 - torch.tanh(at) ** 2)
            dq[b, h] = scale * ds @ kh
            dk[b, g] += scale * ds.T @ qh
    for name, t in (("dq", dq), ("dk", dk), ("dv", dv)):
        out[name].copy_(t)


CASES = {
    "gqa": dict(heads=4, kv_heads=2, seq_q=21, seq_k=45, causal=False),
    "softcap": dict(seq_q=33, seq_k=33, softcap=2.0, logit_scale=4.0),
    "packed-padded": dict(batch=3, seq_q=40, seq_k=40, packing="packed_padded",
                          segments=3),
    "saturated-bf16": dict(heads=2, kv_heads=2, seq_q=64, seq_k=64, head_dim=32,
                           dtype="bfloat16", logit_scale=30.0),
    "empty-rows": dict(seq_q=45, seq_k=21, align="bottom_right"),
}


def params(**kw) -> dict:
    small = dict(batch=2, heads=2, kv_heads=2, head_dim=8, dtype="float32")
    return {**SPEC.params.defaults(), **small, **kw}


def run(case: str, **knobs):
    p = params(**CASES[case])
    assert SPEC.check_case(p) is None, SPEC.check_case(p)
    c = Case(op="attention", group="variants", id=f"attention/variants/{case}",
             tags=frozenset({"ci"}), params=MappingProxyType(p), seed=5, file="<test>")
    impl = Implementation(op="attention", name="variant", kind="external",
                          fn=lambda **a: backward(**a, **knobs))
    return run_item(CaseContext(SPEC, c, OPTS), impl, None, CEIL, {})


@pytest.mark.parametrize("case", CASES)
def test_without_a_knob_the_backward_passes(case):
    assert run(case).verdict == "pass"


@pytest.mark.parametrize("case, knob, cause, words", [
    ("gqa", "kv_modulo", "gqa_interleaved", "query head h reading key/value head h % Hkv"),
    ("softcap", "softcap_at_capped", "softcap_grad_at_capped",
     "the softcap derivative at the capped score"),
    ("saturated-bf16", "scores_in_dtype", "scores_16bit", "the scores formed in bfloat16"),
    ("packed-padded", "padding_sees_padding", "padding_sees_padding",
     "padding tokens seeing each other"),
])
def test_a_backward_computed_otherwise_is_named_by_its_story(case, knob, cause, words):
    row = run(case, **{knob: True})
    assert row.verdict == "fail", row.reason
    assert row.diagnosis_cause == cause and words in row.diagnosis, row.diagnosis


def test_the_stories_need_their_feature():
    # h % Hkv is h // (H / Hkv) with one key/value head or one query head a group
    assert "gqa_interleaved" not in diag._hypotheses(params(heads=4, kv_heads=1))
    assert "gqa_interleaved" not in diag._hypotheses(params(heads=2, kv_heads=2))
    assert "softcap_at_capped" not in diag._hypotheses(params())
    assert not any(n.startswith("scores_16bit") for n in diag._hypotheses(params()))
    assert "padding_sees_padding" not in diag._hypotheses(params(packing="packed"))


def test_a_gradient_on_rows_that_see_no_key_is_named_where_no_story_explains_it():
    row = run("empty-rows", empty_rows_uniform=True)
    assert row.verdict == "fail", row.reason
    assert row.diagnosis_cause == "empty_rows_grad", row.diagnosis
    # the rows that see no key are the first 45 - 21 (bottom-right)
    assert "dq wrong only in the first 24 querys (of 45)" in row.diagnosis
