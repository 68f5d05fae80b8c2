"""`--impl native`: PyTorch's own autograd through the model (F.layer_norm, SDPA, F.linear,
F.conv1d, F.cross_entropy), no op contract, the optimizer as eager's; every check applies."""

import dataclasses

import pytest
import torch

from bwd_suite.suite.outcomes import Verdict
from bwd_suite.suite.step import backends as be
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
