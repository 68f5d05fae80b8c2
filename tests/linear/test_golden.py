"""golden/linear.py against float64 autograd of the forward it states, in both positions of
the activation, saved and recomputed, with and without bias; and its derivatives against
autograd of each activation (gradcheck on tiny shapes)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from bwd_suite.golden import linear as golden
from tests.golden_support import one_thread, rel_err  # noqa: F401 - fixture

F64 = torch.float64
FORMS = [("none", "none"), ("relu", "none"), ("gelu", "none"), ("gelu", "tanh"),
         ("silu", "none")]


def torch_act(activation, approximate):
    return {"none": lambda t: t, "relu": F.relu, "silu": F.silu,
            "gelu": lambda t: F.gelu(t, approximate=approximate)}[activation]


@pytest.mark.parametrize("activation, approximate", FORMS)
def test_the_activation_and_its_derivative_are_pytorchs(activation, approximate):
    z = torch.linspace(-6, 6, 1001, dtype=F64).requires_grad_()
    y = torch_act(activation, approximate)(z)
    (g,) = torch.autograd.grad(y.sum(), z)
    assert rel_err(golden.act(z.detach(), activation, approximate), y.detach()) < 1e-15
    assert rel_err(golden.act_grad(z.detach(), activation, approximate), g) < 1e-14


@pytest.mark.parametrize("activation, approximate", FORMS)
@pytest.mark.parametrize("act_at", ["output", "input"])
@pytest.mark.parametrize("has_bias", [True, False])
@pytest.mark.parametrize("saved", [True, False])
def test_the_backward_is_autograds(activation, approximate, act_at, has_bias, saved):
    g = torch.Generator().manual_seed(3)
    M, N, K = 7, 5, 3
    x, w, dy = (torch.randn(s, generator=g, dtype=F64) for s in ((M, K), (N, K), (M, N)))
    b = torch.randn(N, generator=g, dtype=F64)
    leaves = [t.clone().requires_grad_() for t in (x, w, b)]
    f = torch_act(activation, approximate)
    bias = leaves[2] if has_bias else None
    y = f(F.linear(leaves[0], leaves[1], bias)) if act_at == "output" \
        else F.linear(f(leaves[0]), leaves[1], bias)
    grads = torch.autograd.grad(y, leaves[:3 if has_bias else 2], dy)
    z = golden.preactivation(x, w, b if has_bias else None)
    kw = dict(z=z if saved and act_at == "output" else None,
              a=golden.act(x, activation, approximate) if saved and act_at == "input"
              else None)
    out = golden.backward(x, w, dy, bias=b if has_bias else None, activation=activation,
                          approximate=approximate, act_at=act_at, has_bias=has_bias, **kw)
    assert sorted(out) == (["db", "dw", "dx"] if has_bias else ["dw", "dx"])
    for name, ref in zip(("dx", "dw", "db"), grads):
        assert rel_err(out[name], ref) < 1e-13, name


def test_a_saved_preactivation_is_what_the_derivative_reads():
    # the saved z decides the derivative, not x w^T + b: a kernel handed z must use it
    g = torch.Generator().manual_seed(4)
    x, w, dy = (torch.randn(s, generator=g, dtype=F64) for s in ((4, 3), (2, 3), (4, 2)))
    z = -golden.preactivation(x, w, None)
    out = golden.backward(x, w, dy, z=z, activation="relu")
    expect = dy * (z > 0)
    assert rel_err(out["dx"], expect @ w) < 1e-15


def test_gradcheck_on_a_tiny_shape():
    g = torch.Generator().manual_seed(5)
    x, w = (torch.randn(s, generator=g, dtype=F64, requires_grad=True) for s in ((3, 2), (4, 2)))
    dy = torch.randn(3, 4, generator=g, dtype=F64)
    for act_at in ("output", "input"):
        def fwd(xx, ww):
            return (golden.act(golden.preactivation(xx, ww, None), "silu") if act_at == "output"
                    else golden.act(xx, "silu") @ ww.T)
        torch.autograd.gradcheck(fwd, (x, w))
        ref = torch.autograd.grad(fwd(x, w), (x, w), dy)
        out = golden.backward(x.detach(), w.detach(), dy, activation="silu", act_at=act_at)
        assert rel_err(out["dx"], ref[0]) < 1e-13 and rel_err(out["dw"], ref[1]) < 1e-13
