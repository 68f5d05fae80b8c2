"""Helpers shared by the golden self-check tests (tests/test_golden_*.py)."""

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
