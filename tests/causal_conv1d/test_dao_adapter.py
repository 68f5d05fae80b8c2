"""The Dao causal-conv1d adapter (no GPU needed: the adapter registers with its reason when
the package is missing): the inputs that fault its kernel are refused before the call, its
known wrong answers are strict xfails on exactly the cases that have them, and its call
hands Dao's op the suite's outputs as destinations (against a stand-in for the op)."""

import pytest
import torch

from bwd_suite.kernels.causal_conv1d import dao as adapter
from bwd_suite.suite import registry
from bwd_suite.suite.cases import load_cases

DAO = ("dao", "dao_det")


def _impls():
    return registry.select_implementations("causal_conv1d", list(DAO))


def test_misaligned_16bit_dout_is_refused_in_both_layouts():
    base = dict(registry.op("causal_conv1d").params.defaults(), dim=48, dout_layout="sliced")
    for impl in _impls():
        for layout in ("channel_last", "channel_first"):
            for dtype in ("bfloat16", "float16"):
                assert "misaligned" in impl.supports(dict(base, dtype=dtype, layout=layout))
        # fp32 slices stay 16-byte aligned
        assert impl.supports(dict(base, dtype="float32", layout="channel_last")) is None
        assert impl.supports(dict(base, dtype="bfloat16", dout_layout="like_x")) is None


def test_what_its_wrapper_raises_on_or_its_launch_fails_on_is_unsupported():
    base = dict(registry.op("causal_conv1d").params.defaults(), dim=48)
    for impl in _impls():
        assert "multiples of 8" in impl.supports(dict(base, layout="channel_last",
                                                      dout_layout="other"))
        assert "65535" in impl.supports(dict(base, layout="channel_first", dim=65536))
        assert impl.supports(dict(base, layout="channel_first", dim=65535)) is None


def test_padding_ids_are_known_failures_on_exactly_the_padding_cases():
    cases = load_cases(op="causal_conv1d", profile="nightly") + load_cases(
        op="causal_conv1d", profile="gpu")
    assert any(c.params["seq_idx"].startswith("padding") for c in cases)
    for impl in _impls():
        for c in cases:
            padding = c.params["seq_idx"].startswith("padding")
            why = impl.known_failure(c.id) or ""
            assert ("padding ids" in why) == padding, c.id
            # the only others: the fuzzer's findings, declared case by case
            assert padding or not why or c.group.startswith("dao-"), c.id


# ------------------------------------------------- the call, against a stand-in for its op

class _FakeOp:
    """Dao's op as the adapter sees it: writes dx and dinitial_states, adds into dweight and
    dbias (its kernels accumulate into the zeros they are given)."""

    def __init__(self):
        self.calls = []

    def __call__(self, *, x, weight, bias, dout, seq_idx, initial_states, dfinal_states, dx,
                 dweight, dbias, dinitial_states, silu_activation):
        self.calls.append(dict(dx=dx, dweight=dweight, dbias=dbias,
                               dinitial_states=dinitial_states, silu=silu_activation))
        dx.fill_(2.0)
        dweight.add_(3.0)
        if dbias is not None:
            dbias.add_(4.0)
        if dinitial_states is not None:
            dinitial_states.copy_(torch.arange(dinitial_states.numel(), dtype=torch.float32)
                                  .reshape(dinitial_states.shape))


def _case(wdtype, init_channel_last=True, bias=True, states=True):
    B, D, L, K = 2, 8, 16, 4
    x = torch.randn(B, D, L)
    weight = torch.randn(D, K, dtype=wdtype)
    init = None
    if states:
        init = torch.randn(B, K - 1, D).transpose(1, 2) if init_channel_last else \
            torch.randn(B, D, K - 1)
    nan = float("nan")
    out = {"dx": torch.full_like(x, nan), "dweight": torch.full_like(weight, nan)}
    if bias:
        out["dbias"] = torch.full((D,), nan, dtype=wdtype)
    if states:
        out["dinitial_states"] = torch.full_like(init, nan)
    kw = dict(x=x, weight=weight, bias=torch.randn(D, dtype=wdtype) if bias else None,
              dout=torch.randn(B, D, L), seq_idx=None, initial_states=init,
              dfinal_states=None, activation="silu")
    return kw, out


def test_fp32_parameters_are_accumulated_in_the_outputs_themselves(monkeypatch):
    op = _FakeOp()
    monkeypatch.setattr(adapter, "_causal_conv1d_bwd_cpp", op)
    kw, out = _case(torch.float32)
    adapter._call(**kw, out=out)
    (c,) = op.calls
    # no temporaries and no copies after the op: what Dao's callers pay, nothing more
    for name in ("dx", "dweight", "dbias", "dinitial_states"):
        assert c[name] is out[name], name
    assert c["silu"] is True
    # zeroed before the op adds into them (the poison is gone)
    assert torch.equal(out["dweight"], torch.full_like(out["dweight"], 3.0))
    assert torch.equal(out["dbias"], torch.full_like(out["dbias"], 4.0))


@pytest.mark.parametrize("init_channel_last", [True, False])
def test_low_precision_parameters_and_other_state_layouts_go_through_temporaries(
        monkeypatch, init_channel_last):
    op = _FakeOp()
    monkeypatch.setattr(adapter, "_causal_conv1d_bwd_cpp", op)
    kw, out = _case(torch.bfloat16, init_channel_last=init_channel_last)
    adapter._call(**kw, out=out)
    (c,) = op.calls
    # Dao accumulates in fp32 and casts to the parameters' dtype, as its wrapper does
    assert c["dweight"].dtype == torch.float32 and c["dweight"] is not out["dweight"]
    assert c["dbias"].dtype == torch.float32
    assert torch.equal(out["dweight"], torch.full_like(out["dweight"], 3.0))
    assert torch.equal(out["dbias"], torch.full_like(out["dbias"], 4.0))
    # its kernel writes the states channel-last: another layout gets them copied over
    assert c["dinitial_states"].stride(1) == 1
    assert (c["dinitial_states"] is out["dinitial_states"]) == init_channel_last
    assert torch.equal(out["dinitial_states"], c["dinitial_states"])


def test_absent_bias_and_states_are_passed_as_none(monkeypatch):
    op = _FakeOp()
    monkeypatch.setattr(adapter, "_causal_conv1d_bwd_cpp", op)
    kw, out = _case(torch.float32, bias=False, states=False)
    adapter._call(**kw, out=out)
    (c,) = op.calls
    assert c["dbias"] is None and c["dinitial_states"] is None
    assert set(out) == {"dx", "dweight"}
