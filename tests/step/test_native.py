"""`--impl native`: PyTorch's own autograd through the model (F.layer_norm, SDPA, F.linear,
F.conv1d, F.cross_entropy), no op contract, the optimizer as eager's; every check applies."""

import dataclasses

import pytest
import torch

from bwd_suite.suite.outcomes import Verdict
from bwd_suite.suite.step import backends as be, runner
from bwd_suite.suite.step.checks import Judge
from tests.step.test_scenarios import SCENARIOS, run


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("name", ["mamba-tiny-fp32", "transformer-tiny-fp32"])
def test_the_native_step_passes_every_check(name):
    for check, r in run(SCENARIOS[name], be.NATIVE).items():
        if check == "accumulation_mean":
            assert r.verdict is Verdict.FAIL and r.expected
        else:
            assert r.verdict is Verdict.PASS, (check, r.reason)
            assert r.impl == "native"


def test_native_nodes_never_call_the_op_contract(monkeypatch):
    called = []
    real = be.Backends.call

    def call(self, op, *args):
        if self.native:
            called.append(op)
        return real(self, op, *args)

    monkeypatch.setattr(be.Backends, "call", call)
    run(dataclasses.replace(SCENARIOS["transformer-tiny-fp32"], checks=("float64",)),
        be.NATIVE)
    assert set(called) == {"adamw"}  # the optimizer alone goes through its op


def _backends(native, device, deterministic=True):
    choices = {"adamw": be.Choice("adamw", "torch_ref")} if deterministic else {
        "adamw": be.Choice("adamw", "mine", impl=dataclasses.replace(
            be.resolve("adamw", "torch_ref", "--impl").impl, deterministic=False))}
    return be.Backends(choices, torch.device(device), native=native)


def test_native_cuda_autograd_is_not_claimed_bitwise_reproducible():
    # the H100 run: SDPA's backward summed dQ in another order under checkpointing and
    # offload, so those checks must be judged against float64, saying why
    why = _backends(True, "cuda").nondeterministic
    assert why and "use_deterministic_algorithms" in why
    assert _backends(True, "cpu").nondeterministic is None
    assert _backends(False, "cuda").nondeterministic is None
    torch.use_deterministic_algorithms(True)
    try:
        assert _backends(True, "cuda").nondeterministic is None
    finally:
        torch.use_deterministic_algorithms(False)


def test_a_choice_that_declares_nondeterminism_is_named():
    why = _backends(False, "cpu", deterministic=False).nondeterministic
    assert why and "adamw's mine" in why


def test_checkpoint_and_offload_of_a_nondeterministic_run_are_judged_against_float64(
        monkeypatch):
    monkeypatch.setattr(be.Backends, "nondeterministic", property(lambda self: "planted"))
    judged = []
    real = runner._judge

    def spy(judge, *args, **kw):
        judged.append(judge)
        return real(judge, *args, **kw)

    monkeypatch.setattr(runner, "_judge", spy)
    rows = run(dataclasses.replace(SCENARIOS["transformer-tiny-fp32"],
                                   checks=("float64", "checkpoint", "offload")))
    for check in ("checkpoint", "offload"):
        assert rows[check].verdict is Verdict.PASS
        assert rows[check].reason == "against the float64 model, not bitwise: planted"
    assert rows["float64"].reason == ""
    # checkpoint and offload are bitwise checks (SAME): none was judged bit for bit
    assert Judge.FLOAT64 in judged and Judge.SAME not in judged
