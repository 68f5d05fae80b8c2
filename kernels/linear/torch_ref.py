"""PyTorch's linear backward in the case dtype: the eager yardstick and the unfused
reference.

`torch_ref` is autograd, two-phase (docs/contract.md#two-phase-implementations): the
forward (F.linear and the activation, in the case dtype) runs untimed under autograd, and
the timed call is autograd's backward of its graph: what a PyTorch model's training step
runs, the product of its own forward (it recomputes Z and act(x) rather than reading the
case's z and a, as a model does; with recompute = true the forward runs under
torch.utils.checkpoint, so that the backward recomputes them). It is the yardstick of the
tolerance rule.

`torch_unfused` is the backward written out as the PyTorch ops a hand-written layer
calls, into the given outputs: the two matmuls (torch.mm), the activation's derivative by
PyTorch's own elementwise backward kernels (threshold_backward, gelu_backward,
silu_backward) and the bias gradient as a column sum, each its own kernel and pass over
memory; it reads the saved z and a where the case has them, and recomputes them in the
case dtype where it does not. It is what the fused epilogues are measured against.

Both declare bitwise results: cuBLAS reproduces a GEMM bit for bit on one GPU and stream
(split-K reduces through its workspace in a fixed order), and an H100 gave bitwise dx, dw
and db over 10 repeats on every gpu-profile and perf case; a nondeterministic one fails.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from bwd_suite.suite.registry import implementation

_aten = torch.ops.aten


def act_fn(activation: str, approximate: str):
    """The activation as PyTorch's functional op."""
    return {"none": lambda t: t, "relu": F.relu, "silu": F.silu,
            "gelu": lambda t: F.gelu(t, approximate=approximate)}[activation]


def dact_into(grad, pre, activation: str, approximate: str, out: torch.Tensor) -> None:
    """out = grad ⊙ act'(pre) by PyTorch's elementwise backward kernel (its autograd's)."""
    if activation == "relu":
        _aten.threshold_backward.grad_input(grad, pre, 0.0, grad_input=out)
    elif activation == "gelu":
        _aten.gelu_backward.grad_input(grad, pre, approximate=approximate, grad_input=out)
    elif activation == "silu":
        _aten.silu_backward.grad_input(grad, pre, grad_input=out)
    else:
        out.copy_(grad)


def _recomputed(activation: str, z, a) -> bool:
    return activation != "none" and z is None and a is None


def prepare(*, x, w, dy, bias, z, a, activation, approximate, act_at):
    """The forward under autograd on leaves sharing x, w, b's storage; the graph kept."""
    leaves = [t.detach().requires_grad_() for t in (x, w, bias) if t is not None]
    f = act_fn(activation, approximate)

    def forward(xx, ww, *b):
        bb = b[0] if b else None
        if act_at == "output":
            return f(F.linear(xx, ww, bb))
        return F.linear(f(xx), ww, bb)

    with torch.enable_grad():
        if _recomputed(activation, z, a):
            y = checkpoint(forward, *leaves, use_reentrant=False)
        else:
            y = forward(*leaves)
    return {"y": y, "leaves": leaves, "dy": dy}


@implementation("linear", "torch_ref", kind="native", version=torch.__version__,
                prepare=prepare, deterministic=True)
def torch_ref(*, saved, **_):
    """autograd of F.linear and the activation in the case dtype (backward alone)"""
    grads = torch.autograd.grad(saved["y"], saved["leaves"], saved["dy"], retain_graph=True)
    return dict(zip(("dx", "dw", "db"), grads))


@implementation("linear", "torch_unfused", kind="reference", version=torch.__version__,
                deterministic=True)
def torch_unfused(*, x, w, dy, bias, z, a, activation, approximate, act_at, out):
    """two torch.mm, PyTorch's elementwise derivative and a column sum, each on its own"""
    if act_at == "output":
        dz = dy
        if activation != "none":
            pre = z if z is not None else F.linear(x, w, bias)
            dz = torch.empty_like(dy)
            dact_into(dy, pre, activation, approximate, dz)
        torch.mm(dz, w, out=out["dx"])
        torch.mm(dz.t(), x, out=out["dw"])
        if "db" in out:
            torch.sum(dz, 0, out=out["db"])
        return
    if activation == "none":
        torch.mm(dy, w, out=out["dx"])
        acted = x
    else:
        dact_into(torch.mm(dy, w), x, activation, approximate, out["dx"])
        acted = a if a is not None else act_fn(activation, approximate)(x)
    torch.mm(dy.t(), acted, out=out["dw"])
    if "db" in out:
        torch.sum(dy, 0, out=out["db"])
