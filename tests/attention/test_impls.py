"""The implementations of kernels/attention/ that run on a CPU, against the float64
golden and against each other's structure: the implementations' mask builder (masks.py)
agrees with the golden's independently written rules on every block; torch_tiled (the
FlashAttention-2 loop model) matches the golden to fp32 rounding whatever its tile
sizes, skips only tiles that hold no visible pair, and is bitwise reproducible; the
yardstick torch_ref gives the same gradient whatever its block of query rows; rows that
see no key get exact zeros, never NaN; SDPA's math backend refuses what SDPA cannot take.
"""

from __future__ import annotations

import itertools

import pytest
import torch

from bwd_suite.golden import attention as golden
from bwd_suite.kernels.attention import masks, torch_tiled
from bwd_suite.kernels.attention.torch_ref import backward_eager
from bwd_suite.ops.attention import segment_ids
from bwd_suite.suite import registry
from tests.golden_support import one_thread, rel_err  # noqa: F401 - fixture
from tests.attention.test_golden import FEATURES, SMALL

SPEC = registry.op("attention")
CPU = torch.device("cpu")
F64 = torch.float64


def _params(**kw) -> dict:
    return dict(SPEC.params.defaults(), **kw)


def _call(fn, inputs, **extra) -> dict:
    t = inputs.tensors
    out = {n: torch.full_like(t[n[1]], float("nan")) for n in ("dq", "dk", "dv")}
    fn(**t, **inputs.attrs, out=out, **extra)
    return out


def _golden(inputs) -> dict:
    t64 = {k: v.to(F64) if v is not None and v.is_floating_point() else v
           for k, v in inputs.tensors.items()}
    return SPEC.golden(**t64, **inputs.attrs)


RULES = [dict(causal=c, align=a, window_left=wl, window_right=wr)
         for c, a, wl, wr in itertools.product((True, False), ("top_left", "bottom_right"),
                                               (-1, 0, 3), (-1, 0, 2))
         if not (c and wr >= 0)]


@pytest.mark.parametrize("Tq, Tk, packing", [(7, 7, None), (5, 13, None), (13, 5, None),
                                              (9, 9, "packed_padded")])
def test_the_mask_builders_agree(Tq, Tk, packing):
    seq_idx = None
    if packing:
        seq_idx = segment_ids(_params(batch=2, seq_q=Tq, seq_k=Tk, packing=packing,
                                      segments=2))
    for r in RULES:
        want = golden.visible(seq_idx, Tq, Tk, r["causal"], CPU, align=r["align"],
                              window=(r["window_left"], r["window_right"]))
        got = masks.keep(seq_idx, r["causal"], Tq, Tk, CPU, align=r["align"],
                         window_left=r["window_left"], window_right=r["window_right"])
        assert torch.equal(got, want), r
        tile = masks.keep(seq_idx, r["causal"], Tq, Tk, CPU, align=r["align"],
                          window_left=r["window_left"], window_right=r["window_right"],
                          rows=(1, Tq - 1), cols=(2, Tk))
        assert torch.equal(tile, want[..., 1:Tq - 1, 2:]), r


@pytest.mark.parametrize("lengths", [(64, 64), (37, 100), (100, 37), (1, 130)], ids=str)
def test_the_tiled_model_skips_only_empty_tiles(lengths):
    Tq, Tk = lengths
    for r in RULES:
        seen = golden.visible(None, Tq, Tk, r["causal"], CPU, align=r["align"],
                              window=(r["window_left"], r["window_right"]))[0, 0]
        for bq, bk in ((16, 16), (8, 32)):
            for c0 in range(0, Tk, bk):
                kept = set(torch_tiled.query_blocks(c0, min(Tk, c0 + bk), Tq, Tk,
                                                    r["causal"], r["align"],
                                                    r["window_left"], r["window_right"], bq))
                for r0 in range(0, Tq, bq):
                    if seen[r0:r0 + bq, c0:c0 + bk].any():
                        assert r0 in kept, (r, bq, bk, r0, c0)


TILES = [dict(), dict(block_q=16, block_k=32), dict(block_q=7, block_k=5)]


@pytest.mark.parametrize("tiles", TILES, ids=["64x64", "16x32", "7x5"])
@pytest.mark.parametrize("name", sorted(FEATURES))
def test_the_tiled_model_matches_the_golden_in_fp32(name, tiles):
    inputs = SPEC.make_inputs(_params(**dict(SMALL, **FEATURES[name])), 3, CPU)
    want = _golden(inputs)
    got = _call(torch_tiled.backward_tiled, inputs, **tiles)
    for n in ("dq", "dk", "dv"):
        assert rel_err(got[n].to(F64), want[n]) < 2e-6, (n, rel_err(got[n].to(F64), want[n]))


def test_the_tiled_model_is_bitwise_reproducible_and_exact_on_empty_rows():
    p = _params(batch=2, heads=4, kv_heads=1, head_dim=16, seq_q=150, seq_k=70,
                align="bottom_right", dtype="bfloat16", mask="additive", dropout=0.2)
    inputs = SPEC.make_inputs(p, 11, CPU)
    one = _call(torch_tiled.backward_tiled, inputs)
    two = _call(torch_tiled.backward_tiled, inputs)
    assert all(torch.equal(one[n], two[n]) for n in one)
    empty = 150 - 70  # bottom-right: the first Tq - Tk queries see nothing
    assert not one["dq"][:, :, :empty].any() and one["dq"][:, :, empty:].abs().amax() > 0
    ref = _call(backward_eager, inputs)
    assert not ref["dq"][:, :, :empty].any()
    assert all(torch.isfinite(x).all() for x in list(one.values()) + list(ref.values()))


def test_the_tiled_model_declines_benchmark_lengths():
    tiled = {i.name: i for i in registry.implementations("attention")}["torch_tiled"]
    assert tiled.supports(_params(seq_q=8192, seq_k=8192)) is None
    why = tiled.supports(_params(seq_q=32768, seq_k=32768))
    assert why and "262144 tiles" in why


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("name", ["everything", "window-causal", "bool-mask-per-head",
                                  "mqa-full"])
def test_the_yardstick_is_the_same_whatever_its_block(name, dtype):
    inputs = SPEC.make_inputs(_params(**dict(SMALL, **FEATURES[name], dtype=dtype)), 4, CPU)
    whole = _call(backward_eager, inputs)
    small = _call(backward_eager, inputs, block_elems=1)  # one query row a block
    for n in ("dq", "dk", "dv"):
        # dq rows never mix: equal up to the order of a dot product; dk and dv are
        # accumulated in fp32 over the blocks and rounded once
        err = rel_err(small[n].to(F64), whole[n].to(F64))
        assert err < (1e-6 if dtype == "float32" else 1e-2), (n, err)


@pytest.mark.parametrize("name", ["torch_math", "torch_fp32"])
def test_sdpa_refuses_what_it_cannot_take(name):
    impl = {i.name: i for i in registry.implementations("attention")}[name]
    assert "softcap" in impl.supports(_params(softcap=30.0))
    assert "dropout mask" in impl.supports(_params(dropout=0.1))
    for fine in (dict(align="bottom_right", seq_q=5, seq_k=9), dict(window_left=3),
                 dict(mask="additive"), dict(mask="bool", heads=4, mask_heads=4)):
        assert impl.supports(_params(**fine)) is None, fine


@pytest.mark.parametrize("name", ["bottom-right-short-q", "bottom-right-long-q",
                                  "window-both", "additive-mask", "bool-mask-per-head",
                                  "packed-full"])
def test_sdpa_math_takes_the_visibility_as_an_explicit_mask(name):
    fp32 = {i.name: i for i in registry.implementations("attention")}["torch_fp32"]
    inputs = SPEC.make_inputs(_params(**dict(SMALL, **FEATURES[name])), 5, CPU)
    want = _golden(inputs)
    got = _call(fp32.fn, inputs)
    for n in ("dq", "dk", "dv"):
        assert rel_err(got[n].to(F64), want[n]) < 2e-6, n
