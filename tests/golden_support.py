"""Helpers shared by the golden self-check tests (tests/<op>/test_golden.py)."""

import pytest
import torch

F64 = torch.float64


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """The tensors are tiny: intra-op threads only add overhead, and on a busy 2-core
    machine F.conv1d's thread hand-off was seen to stall ~40 ms per call. Import this
    fixture into a test module to apply it there."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def rel_err(got: torch.Tensor, ref: torch.Tensor) -> float:
    """max |got - ref| / max |ref| (absolute when ref is all zeros)."""
    assert got.shape == ref.shape, (got.shape, ref.shape)
    diff = (got - ref).abs().max().item() if ref.numel() else 0.0
    scale = ref.abs().max().item() if ref.numel() else 0.0
    return diff / scale if scale > 0 else diff


def to64(t):
    return t.to(F64) if t is not None and t.is_floating_point() else t


def smoke_case_params(op: str) -> list:
    """One pytest param per smoke case of `op`, with the case id as the test id. A case
    file that fails to load becomes one param holding the error (the test raises it), so
    the rest of the module stays collectable; no cases at all is a skip with the reason."""
    from bwd_suite.suite.cases import load_cases
    from bwd_suite.suite.errors import SuiteInputError

    try:
        found = load_cases(op=op, profile="smoke")
    except SuiteInputError as e:
        return [pytest.param(e, id="case-files-do-not-load")]
    if not found:
        return [pytest.param(None, id="no-smoke-cases", marks=pytest.mark.skip(
            reason=f"no {op} cases in profile smoke under cases/ yet"))]
    return [pytest.param(c, id=c.id) for c in found]
