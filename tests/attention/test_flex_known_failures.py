"""torch_flex declares the shapes its compile fails on (flex decoding's tile, findings.toml)
as a rule of the case's params, not a list of ids: the rule names every shape that failed
on the H100 and none that passed (samples of run 20261206T181832Z-93db2a, by H, Hkv, Tq)."""

import pytest

from bwd_suite.suite import registry

SPEC = registry.op("attention")
FLEX = {i.name: i for i in registry.implementations("attention")}["torch_flex"]

FAILED = [(8, 2, 113), (8, 2, 63), (8, 2, 64), (8, 2, 65), (8, 2, 127), (4, 1, 64),
          (2, 1, 77), (2, 1, 90), (2, 1, 100), (2, 1, 113), (2, 1, 127)]
PASSED = [(8, 2, 128), (8, 2, 129), (8, 2, 1025), (2, 1, 64), (2, 1, 33), (2, 1, 3),
          (2, 1, 1), (4, 2, 64), (4, 2, 20), (2, 2, 100), (1, 1, 1023), (2, 1, 203)]


def _why(heads, kv_heads, seq_q):
    p = dict(SPEC.params.defaults(), heads=heads, kv_heads=kv_heads, seq_q=seq_q, seq_k=203)
    return FLEX.known_failure("attention/any", "cuda", p)


@pytest.mark.parametrize("heads,kv_heads,seq_q", FAILED)
def test_shapes_that_failed_to_compile_are_declared(heads, kv_heads, seq_q):
    assert "NoValidChoicesError" in (_why(heads, kv_heads, seq_q) or "")


@pytest.mark.parametrize("heads,kv_heads,seq_q", PASSED)
def test_shapes_that_compiled_are_not(heads, kv_heads, seq_q):
    assert _why(heads, kv_heads, seq_q) is None
