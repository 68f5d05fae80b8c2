"""Checks of the float64 golden (golden/attention.py) that never use the golden to check
itself:

1. golden.backward == torch.autograd of a naive float64 attention (every key and value
   head expanded with repeat_interleave, the visibility written out here from the rules,
   softcap, bias and dropout as plain ops), on every smoke case of the repository's case
   files and on a matrix of the features (alignments, windows, softcap, masks, dropout,
   grouped heads, packing);
2. golden.forward == that attention's output and log-sum-exp;
3. the blocks of query rows change nothing: any block size gives the one-block result;
4. exact zeros: a sequence of one token, rows that see no key (bottom-right alignment
   with more queries than keys, a window past the keys, padding, a mask), and the sum over
   the query heads of a group against the same heads given separate key/value heads.
"""

from __future__ import annotations

import pytest
import torch

from bwd_suite.golden import attention as golden
from bwd_suite.suite import registry
from tests.golden_support import one_thread, rel_err, smoke_case_params  # noqa: F401 - fixture

OP = "attention"
CPU = torch.device("cpu")
F64 = torch.float64


def _rules(Tq, Tk, causal, align, left, right, seq_idx, B):
    """(B, 1, Tq, Tk) bool, from the definitions: j - i within the window around the
    diagonal i + off, and the same segment."""
    off = Tk - Tq if align == "bottom_right" else 0
    i = torch.arange(Tq)[:, None]
    j = torch.arange(Tk)[None, :]
    keep = torch.ones(B, 1, Tq, Tk, dtype=torch.bool)
    if causal:
        keep &= j <= i + off
    if right >= 0:
        keep &= j <= i + off + right
    if left >= 0:
        keep &= j >= i + off - left
    if seq_idx is not None:
        s = seq_idx.long()
        keep &= (s[:, None, :, None] == s[:, None, None, :]) & (s[:, None, :, None] >= 0)
    return keep


def _naive(q, k, v, a, seq_idx=None, attn_mask=None, dropout_mask=None):
    """(o, lse, leaves) by plain float64 ops with autograd on q, k, v."""
    q, k, v = (t.detach().to(F64).clone().requires_grad_(True) for t in (q, k, v))
    B, H, Tq, _ = q.shape
    Hkv, Tk = k.shape[1], k.shape[2]
    kk = k.repeat_interleave(H // Hkv, dim=1)
    vv = v.repeat_interleave(H // Hkv, dim=1)
    keep = _rules(Tq, Tk, a["causal"], a.get("align", "top_left"), a.get("window_left", -1),
                  a.get("window_right", -1), seq_idx, B)
    scores = torch.einsum("bhid,bhjd->bhij", q, kk) * a["scale"]
    cap = a.get("softcap", 0.0)
    if cap:
        scores = cap * torch.tanh(scores / cap)
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            keep = keep & attn_mask
        else:
            keep = keep & torch.isfinite(attn_mask)
            scores = scores + attn_mask.to(F64).masked_fill(~keep, 0.0)
    scores = scores.masked_fill(~keep, float("-inf"))
    lse = torch.logsumexp(scores, -1)
    p = torch.softmax(scores, -1).nan_to_num(0.0)  # rows that see nothing: 0
    if a.get("dropout", 0.0):
        p = p * dropout_mask / (1 - a["dropout"])
    o = torch.einsum("bhij,bhjd->bhid", p, vv)
    return o, lse, (q, k, v)


def _kw(t, a) -> dict:
    return dict(seq_idx=t["seq_idx"], align=a["align"],
                window=(a["window_left"], a["window_right"]), softcap=a["softcap"],
                attn_mask=t["attn_mask"], dropout_mask=t["dropout_mask"], dropout=a["dropout"])


def _inputs(p, seed=3):
    spec = registry.op(OP)
    inputs = spec.make_inputs(dict(spec.params.defaults(), **p), seed, CPU)
    return inputs.tensors, dict(inputs.attrs)


def _against_autograd(t, a, tol=1e-12):
    o, _, leaves = _naive(t["q"], t["k"], t["v"], a, t["seq_idx"], t["attn_mask"],
                          t["dropout_mask"])
    grads = torch.autograd.grad(o, leaves, t["dout"].to(F64))
    got = golden.backward(t["q"], t["k"], t["v"], t["dout"], a["scale"], a["causal"],
                          **_kw(t, a))
    for name, want in zip(("dq", "dk", "dv"), grads):
        err = rel_err(got[name], want)
        assert err < tol, (name, err)


@pytest.mark.parametrize("case", smoke_case_params(OP))
def test_backward_matches_autograd_on_smoke_cases(case):
    if isinstance(case, Exception):
        raise case
    spec = registry.op(OP)
    inputs = spec.make_inputs(case.params, case.seed, CPU)
    _against_autograd(inputs.tensors, inputs.attrs)


SMALL = dict(batch=2, heads=4, kv_heads=2, head_dim=8, dtype="float32")
FEATURES = {
    "mha-causal": dict(seq_q=13, seq_k=13, kv_heads=4),
    "mqa-full": dict(seq_q=11, seq_k=7, causal=False, kv_heads=1),
    "top-left-short-q": dict(seq_q=5, seq_k=17),
    "bottom-right-short-q": dict(seq_q=5, seq_k=17, align="bottom_right"),
    "bottom-right-long-q": dict(seq_q=17, seq_k=5, align="bottom_right"),
    "window-causal": dict(seq_q=19, seq_k=23, window_left=4, align="bottom_right"),
    "window-both": dict(seq_q=19, seq_k=16, causal=False, window_left=3, window_right=2),
    "window-top-left-past-keys": dict(seq_q=24, seq_k=9, window_left=3),
    "softcap": dict(seq_q=9, seq_k=12, softcap=2.0, logit_scale=10.0),
    "bool-mask": dict(seq_q=16, seq_k=21, mask="bool", align="bottom_right"),
    "bool-mask-per-head": dict(seq_q=16, seq_k=16, mask="bool", mask_heads=4, causal=False),
    "additive-mask": dict(seq_q=12, seq_k=14, mask="additive", mask_scale=3.0,
                          window_left=5),
    "dropout": dict(seq_q=10, seq_k=15, dropout=0.3, causal=False),
    "everything": dict(seq_q=18, seq_k=18, softcap=5.0, mask="additive", mask_heads=4,
                       dropout=0.17, window_left=6, align="bottom_right",
                       packing="packed_padded", segments=2),
    "packed-full": dict(seq_q=20, seq_k=20, causal=False, packing="packed", segments=3,
                        window_left=4, window_right=1),
}


@pytest.mark.parametrize("name", sorted(FEATURES))
def test_backward_matches_autograd_with_every_feature(name):
    p = dict(SMALL, **FEATURES[name])
    assert registry.op(OP).check_case(dict(registry.op(OP).params.defaults(), **p)) is None
    t, a = _inputs(p)
    _against_autograd(t, a)


@pytest.mark.parametrize("name", ["bottom-right-long-q", "everything", "softcap", "dropout"])
def test_forward_matches_naive_attention(name):
    t, a = _inputs(dict(SMALL, **FEATURES[name]))
    o, lse, _ = _naive(t["q"], t["k"], t["v"], a, t["seq_idx"], t["attn_mask"],
                       t["dropout_mask"])
    got_o, got_lse = golden.forward(t["q"], t["k"], t["v"], a["scale"], a["causal"],
                                    **_kw(t, a))
    assert rel_err(got_o, o.detach()) < 1e-13
    finite = torch.isfinite(lse)
    assert torch.equal(finite, torch.isfinite(got_lse))
    assert rel_err(got_lse[finite], lse.detach()[finite]) < 1e-13
    assert bool((got_lse[~finite] == float("-inf")).all())
    # the op hands kernels this forward rounded: o in the dtype and layout, lse in fp32
    assert torch.equal(t["o"], got_o.to(torch.float32)) and t["lse"].dtype == torch.float32
    assert torch.equal(t["lse"], got_lse.to(torch.float32))


@pytest.mark.parametrize("name", ["everything", "window-causal", "bottom-right-long-q"])
@pytest.mark.parametrize("block", [1, 4, 7])
def test_blocks_of_query_rows_change_nothing(name, block):
    t, a = _inputs(dict(SMALL, **FEATURES[name]))
    args = (t["q"], t["k"], t["v"], t["dout"], a["scale"], a["causal"])
    whole = golden.backward(*args, **_kw(t, a), block=10 ** 6)
    blocked = golden.backward(*args, **_kw(t, a), block=block)
    for n in ("dq", "dk", "dv"):
        assert rel_err(blocked[n], whole[n]) < 1e-14, n
    o1, l1 = golden.forward(*args[:3], a["scale"], a["causal"], **_kw(t, a), block=block)
    o2, l2 = golden.forward(*args[:3], a["scale"], a["causal"], **_kw(t, a), block=10 ** 6)
    assert rel_err(o1, o2) < 1e-14 and torch.equal(torch.isfinite(l1), torch.isfinite(l2))


def test_block_rows_bound_the_scores_of_a_block():
    assert golden.block_rows(128) == golden.ROWS
    assert golden.block_rows(32768) * 32768 <= golden.BLOCK_ELEMS
    assert golden.block_rows(1 << 40) == 1


def test_exact_zeros():
    g = torch.Generator().manual_seed(0)
    q, k, v, do = (torch.randn(1, 2, 1, 4, generator=g, dtype=F64) for _ in range(4))
    one = golden.backward(q, k, v, do, 0.5, True)
    assert not one["dq"].any() and not one["dk"].any()  # one key: P = 1, dS = 0
    assert torch.equal(one["dv"], do)                   # dV = P^T dO
    q, k, v, do = (torch.randn(1, 1, 6, 4, generator=g, dtype=F64) for _ in range(4))
    seg = torch.tensor([[0, 0, 1, 1, -1, -1]], dtype=torch.int32)
    r = golden.backward(q, k, v, do, 0.5, False, seg)
    for name in ("dq", "dk", "dv"):
        assert not r[name][0, 0, 4:].any(), name     # padding: no gradient
        assert r[name][0, 0, :4].abs().min() > 0, name


@pytest.mark.parametrize("kw, empty_rows, unseen_keys", [
    # bottom-right, 7 queries on 3 keys: queries 0..3 see nothing
    (dict(seq_q=7, seq_k=3, align="bottom_right"), range(0, 4), range(0)),
    # top-left, a window of 2 past 5 keys: queries 7.. see nothing
    (dict(seq_q=12, seq_k=5, window_left=2), range(7, 12), range(0)),
    # bottom-right, a window right of the diagonal, more keys: the first keys unseen
    (dict(seq_q=4, seq_k=10, align="bottom_right", window_left=1), range(0), range(0, 5)),
])
def test_rows_that_see_no_key_have_zero_gradients(kw, empty_rows, unseen_keys):
    t, a = _inputs(dict(SMALL, **kw))
    r = golden.backward(t["q"], t["k"], t["v"], t["dout"], a["scale"], a["causal"],
                        **_kw(t, a))
    o, lse = golden.forward(t["q"], t["k"], t["v"], a["scale"], a["causal"], **_kw(t, a))
    rows = list(empty_rows)
    assert not r["dq"][:, :, rows].any() and not o[:, :, rows].any()
    assert bool((lse[:, :, rows] == float("-inf")).all())
    others = [i for i in range(kw["seq_q"]) if i not in rows]
    assert bool(torch.isfinite(lse[:, :, others]).all())  # the others see a key
    assert o[:, :, others].abs().amax(-1).min() > 0
    keys = list(unseen_keys)
    assert not r["dk"][:, :, keys].any() and not r["dv"][:, :, keys].any()


def test_a_mask_hiding_a_whole_row_zeroes_it():
    t, a = _inputs(dict(SMALL, seq_q=6, seq_k=6, causal=False, mask="additive"))
    mask = t["attn_mask"].clone()
    mask[:, :, 2] = float("-inf")
    t = dict(t, attn_mask=mask)
    r = golden.backward(t["q"], t["k"], t["v"], t["dout"], a["scale"], a["causal"],
                        **_kw(t, a))
    assert not r["dq"][:, :, 2].any() and r["dq"][:, :, 3].abs().min() > 0
    _against_autograd(t, a)


def test_grouped_heads_sum_over_their_query_heads():
    g = torch.Generator().manual_seed(1)
    q = torch.randn(1, 4, 5, 3, generator=g, dtype=F64)
    k, v = (torch.randn(1, 2, 7, 3, generator=g, dtype=F64) for _ in range(2))
    do = torch.randn(1, 4, 5, 3, generator=g, dtype=F64)
    kw = dict(align="bottom_right", window=(3, -1), softcap=1.5)
    grouped = golden.backward(q, k, v, do, 0.7, True, **kw)
    full = golden.backward(q, k.repeat_interleave(2, 1), v.repeat_interleave(2, 1), do, 0.7,
                           True, **kw)
    assert torch.allclose(grouped["dq"], full["dq"], rtol=0, atol=1e-14)
    for name in ("dk", "dv"):
        summed = full[name].view(1, 2, 2, 7, 3).sum(2)
        assert torch.allclose(grouped[name], summed, rtol=0, atol=1e-14), name


def test_d_from_the_saved_o_is_the_same_gradient_up_to_o():
    t, a = _inputs(dict(SMALL, **FEATURES["everything"]))
    exact_o, _ = golden.forward(t["q"], t["k"], t["v"], a["scale"], a["causal"], **_kw(t, a))
    args = (t["q"], t["k"], t["v"], t["dout"], a["scale"], a["causal"])
    one = golden.backward(*args, **_kw(t, a))
    other = golden.backward(*args, o=exact_o, **_kw(t, a))
    for n in ("dq", "dk", "dv"):
        assert rel_err(other[n], one[n]) < 1e-12, n
