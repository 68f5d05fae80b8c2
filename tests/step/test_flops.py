"""A step's FLOPs per stage count an op's backward that runs no aten op (a compiled kernel)
by the op's own count (suite/step/backends.unseen_flops), and never twice one that does."""

import dataclasses

import torch
from torch.utils.flop_counter import FlopCounterMode

from bwd_suite.suite import registry
from bwd_suite.suite.cases import load_cases
from bwd_suite.suite.step import backends as be


def numpy_linear(x, w, dy, bias, z, a, activation, approximate, act_at, out):
    """linear's backward without an activation, in numpy: FlopCounterMode sees nothing."""
    X, W, G = (t.double().numpy() for t in (x, w, dy))
    out["dx"].copy_(torch.from_numpy(G @ W))
    out["dw"].copy_(torch.from_numpy(G.T @ X))
    if out.get("db") is not None:
        out["db"].copy_(torch.from_numpy(G.sum(0)))


def _case():
    return next(c for c in load_cases(op="linear") if c.params["activation"] == "none"
                and c.params["m"] * c.params["n"] * c.params["k"] > 1000)


def _counted(name: str, kind: str = ""):
    case = _case()
    spec = registry.ops()["linear"]
    choice = be.resolve("linear", name, "test")
    if kind:
        choice = dataclasses.replace(choice, impl=dataclasses.replace(choice.impl, kind=kind))
    backends = be.Backends({"linear": choice}, torch.device("cpu"))
    inputs = spec.make_inputs(case.params, case.seed, torch.device("cpu"))
    counter = FlopCounterMode(display=False)
    with counter, be.unseen_flops(counter) as unseen:
        backends.call("linear", case.params, inputs)
    return counter.get_total_flops(), unseen[0], spec.flops(case.params)


def test_a_compiled_backward_the_counter_cannot_see_counts_its_ops_flops():
    seen, unseen, analytic = _counted(f"{__name__}:numpy_linear", kind="ours")
    assert seen == 0 and unseen == analytic > 0


def test_an_outside_backward_is_left_to_the_counter():
    assert _counted(f"{__name__}:numpy_linear")[:2] == (0, 0)


def test_a_backward_the_counter_sees_is_not_counted_twice():
    seen, unseen, _ = _counted("torch_ref")
    assert seen > 0 and unseen == 0
