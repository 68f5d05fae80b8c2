"""The offload check's hooks (suite/step/offload.py): a saved tensor comes back from the
host with its values, strides and offset alignment, so a layout-keyed backward reads what
it read without offload."""

import torch

from bwd_suite.suite.step import offload


def _roundtrip(t: torch.Tensor) -> torch.Tensor:
    return offload.unpack(offload.pack(t, pin=False), pin=False)


def test_a_strided_view_keeps_its_strides_and_alignment():
    fused = torch.randn(3, 10, 16)  # (batch, seq, 2 x width): x and z halves of a projection
    z = fused[..., 8:].transpose(1, 2)  # a view at offset 8, not dense, transposed
    back = _roundtrip(z)
    assert back.stride() == z.stride()
    # the offset modulo 256 bytes (64 floats) kept: a fresh allocation starts aligned
    assert back.storage_offset() == z.storage_offset() % 64 == 8
    assert torch.equal(back, z)
    assert back.untyped_storage().data_ptr() != z.untyped_storage().data_ptr()  # a copy


def test_contiguous_expanded_and_empty_tensors_round_trip():
    for t in (torch.arange(12.0).view(3, 4), torch.ones(4, 1).expand(4, 5),
              torch.empty(0, 3), torch.tensor(2.5, dtype=torch.bfloat16)):
        back = _roundtrip(t)
        assert back.shape == t.shape and back.stride() == t.stride() and back.dtype == t.dtype
        assert torch.equal(back, t)


def test_the_backward_under_the_hooks_reads_the_saved_values():
    w = torch.randn(5, 8, dtype=torch.float64, requires_grad=True)
    fused = torch.randn(4, 16, dtype=torch.float64)
    x = fused[:, 3:11]  # an odd offset
    plain = torch.autograd.grad((x @ w.T).sin().sum(), w)[0]
    with offload.on_host(torch.device("cpu")):
        loss = (x @ w.T).sin().sum()
    fused.zero_()  # the saved x must be the host copy, not the (now zeroed) storage
    assert torch.equal(torch.autograd.grad(loss, w)[0], plain)


def test_a_failing_host_copy_is_the_harness_verdict_not_the_implementations(monkeypatch):
    from bwd_suite.suite.outcomes import FailureKind, Verdict
    from bwd_suite.suite.step import runner, scenario

    s = next(x for x in scenario.load(profile="ci") if x.name == "mamba-tiny-fp32")
    cs = runner.choice_set(s, None)

    def refuse(t, pin):
        raise RuntimeError("pinned memory allocation failed")
    monkeypatch.setattr(offload, "pack", refuse)
    outcomes = runner.check_steps(s, cs, "cpu")
    verdict, kind, why = outcomes["offload"].error
    assert (verdict, kind) == (Verdict.ERROR, FailureKind.HARNESS)
    assert "the offload check's copy of a saved tensor to the host" in why
    assert "pinned memory allocation failed" in why
    # the checks that never offload are judged as ever
    assert outcomes["float64"].error is None and outcomes["float64"].judged
