"""Checks of the float64 golden (golden/attention.py) that never use the golden to check
itself:

1. golden.backward == torch.autograd of a naive float64 attention (every key and value
   head expanded with repeat_interleave, the mask written out here from seq_idx), on every
   smoke case of the repository's case files;
2. golden.forward == that attention's output and log-sum-exp;
3. exact zeros: a sequence of one token, padding queries and keys, and the sum over the
   query heads of a group against the same heads given separate key/value heads.
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


def _naive(q, k, v, seq_idx, causal, scale):
    """(o, lse, leaves) by plain float64 ops with autograd on q, k, v."""
    q, k, v = (t.detach().to(F64).clone().requires_grad_(True) for t in (q, k, v))
    H, Hkv, T = q.shape[1], k.shape[1], q.shape[2]
    kk = k.repeat_interleave(H // Hkv, dim=1)
    vv = v.repeat_interleave(H // Hkv, dim=1)
    i = torch.arange(T)
    keep = torch.ones(q.shape[0], 1, T, T, dtype=torch.bool)
    if causal:
        keep &= i[None, :] <= i[:, None]
    if seq_idx is not None:
        s = seq_idx.long()
        keep &= (s[:, None, :, None] == s[:, None, None, :]) & (s[:, None, :, None] >= 0)
    scores = torch.einsum("bhid,bhjd->bhij", q, kk) * scale
    scores = scores.masked_fill(~keep, float("-inf"))
    lse = torch.logsumexp(scores, -1)
    p = torch.softmax(scores, -1).nan_to_num(0.0)  # rows that see nothing: 0
    o = torch.einsum("bhij,bhjd->bhid", p, vv)
    return o, lse, (q, k, v)


def _case_inputs(case):
    spec = registry.op(OP)
    inputs = spec.make_inputs(case.params, case.seed, CPU)
    return inputs.tensors, inputs.attrs


@pytest.mark.parametrize("case", smoke_case_params(OP))
def test_backward_matches_autograd_on_smoke_cases(case):
    if isinstance(case, Exception):
        raise case
    t, a = _case_inputs(case)
    o, _, leaves = _naive(t["q"], t["k"], t["v"], t["seq_idx"], a["causal"], a["scale"])
    grads = torch.autograd.grad(o, leaves, t["dout"].to(F64))
    got = golden.backward(t["q"], t["k"], t["v"], t["dout"], a["scale"], a["causal"],
                          t["seq_idx"])
    for name, want in zip(("dq", "dk", "dv"), grads):
        assert rel_err(got[name], want) < 1e-12, (case.id, name, rel_err(got[name], want))


@pytest.mark.parametrize("packing", ["none", "packed_padded"])
@pytest.mark.parametrize("causal", [True, False])
def test_forward_matches_naive_attention(packing, causal):
    spec = registry.op(OP)
    p = dict(spec.params.defaults(), seq=19, heads=4, kv_heads=2, head_dim=8,
             dtype="float32", packing=packing, causal=causal)
    t, a = spec.make_inputs(p, 3, CPU).tensors, spec.make_inputs(p, 3, CPU).attrs
    o, lse, _ = _naive(t["q"], t["k"], t["v"], t["seq_idx"], causal, a["scale"])
    got_o, got_lse = golden.forward(t["q"], t["k"], t["v"], a["scale"], causal, t["seq_idx"])
    assert rel_err(got_o, o.detach()) < 1e-13
    finite = torch.isfinite(lse)
    assert torch.equal(finite, torch.isfinite(got_lse))
    assert rel_err(got_lse[finite], lse.detach()[finite]) < 1e-13
    assert bool((got_lse[~finite] == float("-inf")).all())
    # the op hands kernels this forward rounded: o in the dtype and layout, lse in fp32
    assert torch.equal(t["o"], got_o.to(torch.float32)) and t["lse"].dtype == torch.float32


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


def test_grouped_heads_sum_over_their_query_heads():
    g = torch.Generator().manual_seed(1)
    q = torch.randn(1, 4, 5, 3, generator=g, dtype=F64)
    k, v = (torch.randn(1, 2, 5, 3, generator=g, dtype=F64) for _ in range(2))
    do = torch.randn(1, 4, 5, 3, generator=g, dtype=F64)
    grouped = golden.backward(q, k, v, do, 0.7, True)
    full = golden.backward(q, k.repeat_interleave(2, 1), v.repeat_interleave(2, 1), do, 0.7,
                           True)
    assert torch.allclose(grouped["dq"], full["dq"], rtol=0, atol=1e-14)
    for name in ("dk", "dv"):
        summed = full[name].view(1, 2, 2, 5, 3).sum(2)
        assert torch.allclose(grouped[name], summed, rtol=0, atol=1e-14), name
