"""Checks of the float64 golden (golden/causal_conv1d.py) that never use the golden to
check itself:

1. golden.backward == torch.autograd through golden.forward, on every smoke case of the
   repository's case files (inputs from the op's own input factory);
2. golden.forward == independent PyTorch (F.conv1d on the state-extended input, or per
   packed segment), and final_states == the last K-1 steps picked by hand;
3. torch.autograd.gradcheck of golden.forward, and golden.backward against central
   finite differences of the forward;
4. tiny examples worked out by hand from the formulas in the golden's docstring.
"""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F

from bwd_suite.golden import causal_conv1d as golden
from bwd_suite.suite import registry
from tests.golden_support import one_thread, rel_err, smoke_case_params, to64  # noqa: F401 - fixture

OP = "causal_conv1d"
CPU = torch.device("cpu")
F64 = torch.float64


def rand(*shape, gen):
    return torch.randn(*shape, generator=gen, dtype=F64)


# ============================================================ 1. backward == autograd


def _autograd_grads(x, weight, bias, seq_idx, init, activation, g, dF):
    leaves = {"dx": x, "dweight": weight, "dbias": bias, "dinitial_states": init}
    leaves = {k: v.detach().clone().requires_grad_(True) for k, v in leaves.items()
              if v is not None}
    out, final = golden.forward(leaves["dx"], leaves["dweight"], bias=leaves.get("dbias"),
                                seq_idx=seq_idx, initial_states=leaves.get("dinitial_states"),
                                activation=activation)
    loss = (out * g).sum()
    if dF is not None:
        loss = loss + (final * dF).sum()
    grads = torch.autograd.grad(loss, list(leaves.values()), allow_unused=True)
    return {k: (gr if gr is not None else torch.zeros_like(leaves[k]))
            for k, gr in zip(leaves, grads)}


@pytest.mark.parametrize("case", smoke_case_params(OP))
def test_backward_matches_autograd_on_smoke_cases(case):
    if isinstance(case, Exception):
        pytest.fail(f"the repository's case files do not load: {case}")
    spec = registry.op(OP)
    inputs = spec.make_inputs(case.params, case.seed, CPU)
    t = {k: to64(v) for k, v in inputs.tensors.items()}
    activation = inputs.attrs["activation"]
    assert activation in (None, "silu")

    got = golden.backward(t["x"], t["weight"], t["dout"], bias=t["bias"],
                          seq_idx=t["seq_idx"], initial_states=t["initial_states"],
                          dfinal_states=t["dfinal_states"], activation=activation)
    ref = _autograd_grads(t["x"], t["weight"], t["bias"], t["seq_idx"], t["initial_states"],
                          activation, t["dout"], t["dfinal_states"])
    assert set(got) == set(ref)
    assert set(got) == {o.name for o in spec.outputs(case.params)}
    for name in ref:
        assert got[name].dtype == F64, name
        err = rel_err(got[name], ref[name])
        assert err <= 1e-12, f"{case.id}: {name} differs from autograd by {err:.3g} (rel)"


# ============================================================ 2. forward == plain PyTorch

def _final_by_hand(x, init, K):
    """final_states[..., j] = x[..., L-(K-1)+j], reaching into init (or zeros) when L is
    shorter than K-1. Built index by index."""
    B, D, L = x.shape
    cols = []
    for j in range(K - 1):
        p = L - (K - 1) + j
        if p >= 0:
            cols.append(x[..., p])
        elif init is not None:
            cols.append(init[..., K - 1 + p])
        else:
            cols.append(x.new_zeros(B, D))
    return torch.stack(cols, dim=-1)


@pytest.mark.parametrize("L", [1, 2, 3, 5, 17])
@pytest.mark.parametrize("K", [2, 3, 4, 5])
@pytest.mark.parametrize("with_init", [False, True], ids=["zeros", "init"])
def test_forward_matches_conv1d_without_seq_idx(L, K, with_init):
    gen = torch.Generator().manual_seed(1000 * L + 10 * K + with_init)
    B, D = 2, 3
    x, w = rand(B, D, L, gen=gen), rand(D, K, gen=gen)
    init = rand(B, D, K - 1, gen=gen) if with_init else None
    left = init if init is not None else x.new_zeros(B, D, K - 1)
    for bias, act in itertools.product([None, rand(D, gen=gen)], [None, "silu"]):
        ref = F.conv1d(torch.cat([left, x], -1), w.unsqueeze(1), bias, groups=D)
        if act == "silu":
            ref = F.silu(ref)
        out, final = golden.forward(x, w, bias=bias, initial_states=init, activation=act)
        assert rel_err(out, ref) <= 1e-12
        assert final.shape == (B, D, K - 1)
        assert torch.equal(final, _final_by_hand(x, init, K))
    # the documented convention: padding=K-1 and keep the first L outputs
    conv = F.conv1d(x, w.unsqueeze(1), padding=K - 1, groups=D)[..., :L]
    if init is None:
        assert rel_err(golden.forward(x, w)[0], conv) <= 1e-12


def _runs(row):
    """[(start, end, id)] of the maximal runs of equal ids."""
    runs, s = [], 0
    for e in range(1, len(row) + 1):
        if e == len(row) or row[e] != row[s]:
            runs.append((s, e, row[s]))
            s = e
    return runs


def _per_segment(x, w, bias, seq_idx, init, act):
    """Each run of equal ids convolved on its own with zero left padding (the first run
    with the initial states); runs with id < 0 give zeros."""
    B, D, L = x.shape
    K = w.shape[1]
    out = torch.zeros_like(x)
    for b in range(B):
        for s, e, sid in _runs(seq_idx[b].tolist()):
            if sid < 0:
                continue
            left = init[b] if (init is not None and s == 0) else x.new_zeros(D, K - 1)
            y = F.conv1d(torch.cat([left, x[b, :, s:e]], -1)[None], w.unsqueeze(1), bias,
                         groups=D)[0]
            out[b, :, s:e] = F.silu(y) if act == "silu" else y
    return out


# patterns whose ids never come back after another id (per-segment == equality mask)
SEGMENT_PATTERNS = ("random", "tile_edges", "mid_tile", "short_segments", "padding_tail",
                    "padding_head", "padding_mid")


@pytest.mark.parametrize("pattern", SEGMENT_PATTERNS)
@pytest.mark.parametrize("L", [1, 7, 40])
@pytest.mark.parametrize("K", [2, 3, 4])
@pytest.mark.parametrize("with_init", [False, True], ids=["zeros", "init"])
def test_forward_matches_per_segment_conv1d(pattern, L, K, with_init):
    spec = registry.op(OP)
    p = dict(spec.params.defaults(), batch=3, dim=5, seqlen=L, width=K, dtype="float32",
             seq_idx=pattern, tile=8, initial_states=with_init, final_states=True)
    inputs = spec.make_inputs(p, seed=17 * L + K, device=CPU)
    t = {k: to64(v) for k, v in inputs.tensors.items()}
    x, w, seq_idx, init = t["x"], t["weight"], t["seq_idx"], t["initial_states"]
    assert seq_idx.shape == (3, L) and seq_idx.dtype == torch.int32
    for row in seq_idx.tolist():  # precondition of the per-segment reference
        ids = [sid for _, _, sid in _runs(row)]
        assert len(ids) == len(set(ids)), f"{pattern} repeats an id: {row}"
    for bias, act in itertools.product([None, t["bias"]], [None, "silu"]):
        out, final = golden.forward(x, w, bias=bias, seq_idx=seq_idx, initial_states=init,
                                    activation=act)
        assert rel_err(out, _per_segment(x, w, bias, seq_idx, init, act)) <= 1e-12
        assert torch.equal(final, _final_by_hand(x, init, K))


def test_seq_idx_mask_is_equality_based_by_hand():
    """seq_idx [0,0,1,0,0], K=4: the second run of id 0 still reads the first run across
    the one-step separator (Dao's mask compares ids, it does not cut at changes)."""
    x = torch.tensor([[[1.0, 10.0, 100.0, 1000.0, 10000.0]]], dtype=F64)
    w = torch.tensor([[1.0, 2.0, 3.0, 4.0]], dtype=F64)  # w[3] multiplies the current step
    seq_idx = torch.tensor([[0, 0, 1, 0, 0]], dtype=torch.int32)
    out, _ = golden.forward(x, w, bias=torch.tensor([0.5], dtype=F64), seq_idx=seq_idx)
    # t0: w3 x0; t1: w2 x0 + w3 x1; t2 (id 1): w3 x2;
    # t3 (id 0): w0 x0 + w1 x1 + w3 x3 (x2 has id 1); t4: w0 x1 + w2 x3 + w3 x4
    expected = torch.tensor([4.0, 43.0, 400.0, 4021.0, 43010.0], dtype=F64) + 0.5
    assert torch.equal(out[0, 0], expected)
    # a per-segment computation would cut t3, t4 off from the first run
    cut = _per_segment(x, w, torch.tensor([0.5], dtype=F64), seq_idx, None, None)[0, 0]
    assert cut[3].item() == 4000.5 and cut[4].item() == 43000.5

    g = torch.tensor([[[1.0, 10.0, 100.0, 1000.0, 10000.0]]], dtype=F64)
    grads = golden.backward(x, w, g, bias=torch.tensor([0.5], dtype=F64), seq_idx=seq_idx)
    # dx[j] = sum over (t, k) with t+k-3 = j and the mask set of w[k] g[t]
    assert grads["dx"][0, 0].tolist() == [1034.0, 12040.0, 400.0, 34000.0, 40000.0]
    # dweight[k] = sum_t M g[t] xc[t+k]
    assert grads["dweight"][0].tolist() == [101000.0, 10000.0, 10000010.0, 101010101.0]
    assert grads["dbias"].tolist() == [11111.0]


def test_seq_idx_initial_states_carry_the_first_id_by_hand():
    """With initial states the state slots carry seq_idx[:, 0]: a later run of that id
    still reaches the last state slot across a separator."""
    s = torch.tensor([[[2.0, 3.0, 5.0]]], dtype=F64)
    x = torch.tensor([[[7.0, 11.0, 13.0]]], dtype=F64)
    w = torch.tensor([[1.0, 10.0, 100.0, 1000.0]], dtype=F64)
    seq_idx = torch.tensor([[0, 1, 0]], dtype=torch.int32)
    out, final = golden.forward(x, w, seq_idx=seq_idx, initial_states=s)
    # t0: w0 s0 + w1 s1 + w2 s2 + w3 x0; t1 (id 1): w3 x1; t2: w0 s2 + w1 x0 + w3 x2
    assert out[0, 0].tolist() == [2 + 30 + 500 + 7000.0, 11000.0, 5 + 70 + 13000.0]
    assert final[0, 0].tolist() == [7.0, 11.0, 13.0]
    # padding first: the states carry id -1 and nothing reads them
    pad = torch.tensor([[-1, 0, 0]], dtype=torch.int32)
    out, _ = golden.forward(x, w, seq_idx=pad, initial_states=s)
    assert out[0, 0].tolist() == [0.0, 11000.0, 1100.0 + 13000.0]  # t2: w2 x1 + w3 x2


# ============================================================ 3. gradcheck and finite differences

_TINY_SEQ_IDX = {
    1: [[0], [-1]],
    2: [[0, 1], [-1, 0]],
    5: [[0, 0, 1, 0, 0], [-1, 0, 0, 1, 1]],
}
_FLAGS = list(itertools.product([False, True], repeat=4))  # bias, silu, init, seq_idx


def _flag_id(f):
    names = ("bias", "silu", "init", "seq")
    return "-".join(n for n, on in zip(names, f) if on) or "plain"


def _tiny(L, K, flags, seed):
    has_bias, silu, has_init, has_seq = flags
    gen = torch.Generator().manual_seed(seed)
    B, D = 2, 3
    leaves = {"x": rand(B, D, L, gen=gen), "weight": rand(D, K, gen=gen)}
    if has_bias:
        leaves["bias"] = rand(D, gen=gen)
    if has_init:
        leaves["initial_states"] = rand(B, D, K - 1, gen=gen)
    seq_idx = torch.tensor(_TINY_SEQ_IDX[L], dtype=torch.int32) if has_seq else None
    return leaves, seq_idx, ("silu" if silu else None), gen


def _forward_of(names, seq_idx, activation):
    def f(*tensors):
        kw = dict(zip(names, tensors))
        return golden.forward(kw["x"], kw["weight"], bias=kw.get("bias"), seq_idx=seq_idx,
                              initial_states=kw.get("initial_states"), activation=activation)
    return f


@pytest.mark.parametrize("flags", _FLAGS, ids=[_flag_id(f) for f in _FLAGS])
@pytest.mark.parametrize("K", [2, 3, 4])
@pytest.mark.parametrize("L", [1, 2, 5])
def test_forward_gradcheck(L, K, flags):
    leaves, seq_idx, act, _ = _tiny(L, K, flags, seed=100 * L + K)
    f = _forward_of(list(leaves), seq_idx, act)
    args = tuple(v.clone().requires_grad_(True) for v in leaves.values())
    assert torch.autograd.gradcheck(f, args, eps=1e-6, atol=1e-8, rtol=1e-6)


@pytest.mark.parametrize("flags", _FLAGS, ids=[_flag_id(f) for f in _FLAGS])
@pytest.mark.parametrize("K", [2, 3, 4])
@pytest.mark.parametrize("L", [1, 2, 5])
def test_backward_matches_central_differences(L, K, flags):
    leaves, seq_idx, act, gen = _tiny(L, K, flags, seed=7 + 100 * L + K)
    names = list(leaves)
    B, D = leaves["x"].shape[:2]
    g, dF = rand(B, D, L, gen=gen), rand(B, D, K - 1, gen=gen)
    f = _forward_of(names, seq_idx, act)

    def phi(vals):
        out, final = f(*vals)
        return ((out * g).sum() + (final * dF).sum()).item()

    grads = golden.backward(leaves["x"], leaves["weight"], g, bias=leaves.get("bias"),
                            seq_idx=seq_idx, initial_states=leaves.get("initial_states"),
                            dfinal_states=dF, activation=act)
    key = {"x": "dx", "weight": "dweight", "bias": "dbias", "initial_states": "dinitial_states"}
    assert set(grads) == {key[n] for n in names}

    # one random direction in all inputs at once, then one in each input alone
    directions = [{n: rand(*leaves[n].shape, gen=gen) for n in names}]
    directions += [{m: (rand(*leaves[m].shape, gen=gen) if m == n
                        else torch.zeros_like(leaves[m])) for m in names} for n in names]
    eps = 1e-6
    for v in directions:
        plus = [leaves[n] + eps * v[n] for n in names]
        minus = [leaves[n] - eps * v[n] for n in names]
        fd = (phi(plus) - phi(minus)) / (2 * eps)
        terms = [(grads[key[n]] * v[n]).sum().item() for n in names]
        analytic = sum(terms)
        scale = max(abs(analytic), 1e-2 * sum(abs(t) for t in terms), 1e-12)
        assert abs(fd - analytic) <= 1e-6 * scale, (fd, analytic)


# ============================================================ 4. by hand

def test_short_sequence_with_states_by_hand():
    """L=1, K=4: xc = [s0, s1, s2, x0]; out = b + w.xc; final = xc[1:] = [s1, s2, x0].
    dxc[k] = w[k] g for k < 4, and dF copies into dxc[1 + j]:
    dinitial_states = [w0 g, w1 g + f0, w2 g + f1]; dx = [w3 g + f2]."""
    s = torch.tensor([[[2.0, 3.0, 5.0]]], dtype=F64)
    x = torch.tensor([[[7.0]]], dtype=F64)
    w = torch.tensor([[1.0, 10.0, 100.0, 1000.0]], dtype=F64)
    b = torch.tensor([0.25], dtype=F64)
    g = torch.tensor([[[0.5]]], dtype=F64)
    dF = torch.tensor([[[-1.0, 4.0, 8.0]]], dtype=F64)

    out, final = golden.forward(x, w, bias=b, initial_states=s)
    assert out.tolist() == [[[0.25 + 2 + 30 + 500 + 7000]]]
    assert final.tolist() == [[[3.0, 5.0, 7.0]]]

    grads = golden.backward(x, w, g, bias=b, initial_states=s, dfinal_states=dF)
    assert grads["dinitial_states"].tolist() == [[[0.5, 5.0 - 1.0, 50.0 + 4.0]]]
    assert grads["dx"].tolist() == [[[500.0 + 8.0]]]
    assert grads["dweight"].tolist() == [[1.0, 1.5, 2.5, 3.5]]  # g * xc
    assert grads["dbias"].tolist() == [0.5]

    # without initial states dF still reaches dx, and the state slots are dropped
    grads = golden.backward(x, w, g, dfinal_states=dF)
    assert set(grads) == {"dx", "dweight"}
    assert grads["dx"].tolist() == [[[508.0]]]
    assert grads["dweight"].tolist() == [[0.0, 0.0, 0.0, 3.5]]


def test_dfinal_is_a_pure_copy_path_by_hand():
    """dout = 0, L=2, K=4: final = [s2, x0, x1], so dinitial_states = [0, 0, f0] and
    dx = [f1, f2]; dweight and dbias are zero."""
    s = torch.tensor([[[2.0, 3.0, 5.0]], [[-2.0, -3.0, -5.0]]], dtype=F64)
    x = torch.tensor([[[7.0, 11.0]], [[1.0, 1.0]]], dtype=F64)
    w = torch.tensor([[1.0, 10.0, 100.0, 1000.0]], dtype=F64)
    dF = torch.tensor([[[1.0, 2.0, 3.0]], [[4.0, 5.0, 6.0]]], dtype=F64)
    for act in (None, "silu"):
        grads = golden.backward(x, w, torch.zeros_like(x), bias=torch.ones(1, dtype=F64),
                                initial_states=s, dfinal_states=dF, activation=act)
        assert grads["dinitial_states"].tolist() == [[[0.0, 0.0, 1.0]], [[0.0, 0.0, 4.0]]]
        assert grads["dx"].tolist() == [[[2.0, 3.0]], [[5.0, 6.0]]]
        assert grads["dweight"].abs().max().item() == 0.0
        assert grads["dbias"].tolist() == [0.0]
