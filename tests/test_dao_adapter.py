"""The Dao causal-conv1d adapter's declared limits (no GPU needed: the adapter registers
with its reason when the package is missing): the inputs that fault its kernel are refused
before the call, and its known wrong answers are strict xfails on exactly the cases that
have them."""

from suite import registry
from suite.cases import load_cases

DAO = ("dao", "dao_det")


def _impls():
    return registry.select_implementations("causal_conv1d", list(DAO))


def test_misaligned_16bit_channel_last_dout_is_refused():
    base = dict(registry.op("causal_conv1d").params.defaults(), layout="channel_last",
                dim=48, dout_layout="sliced")
    for impl in _impls():
        for dtype in ("bfloat16", "float16"):
            assert "misaligned" in impl.supports(dict(base, dtype=dtype))
        # fp32 slices stay 16-byte aligned; channel-first rows are loaded unvectorized
        assert impl.supports(dict(base, dtype="float32")) is None
        assert impl.supports(dict(base, dtype="bfloat16", layout="channel_first")) is None
        assert impl.supports(dict(base, dtype="bfloat16", dout_layout="like_x")) is None


def test_padding_ids_are_known_failures_on_exactly_the_padding_cases():
    cases = load_cases(op="causal_conv1d", profile="nightly") + load_cases(
        op="causal_conv1d", profile="gpu")
    assert any(c.params["seq_idx"].startswith("padding") for c in cases)
    for impl in _impls():
        for c in cases:
            padding = c.params["seq_idx"].startswith("padding")
            assert bool(impl.known_failure(c.id)) == padding, c.id
