"""The linear node: y = x W^T + b, its forward PyTorch's F.linear.

Its backward goes through the same per-op choice as every node, under the op name
"linear". Until the registry holds that op (issue 42), the model gives it as a LocalOp:
the eager backward below, named `torch_ref`, and the same formulas in float64 as its golden;
a scenario can then choose only `torch_ref` for it. When the op lands, `_contract` is the one
place to map onto its contract's names (x, weight, dy here) and parameters.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from bwd_suite.suite import registry
from bwd_suite.suite.opspec import CaseInputs
from bwd_suite.suite.step.backends import LocalOp
from bwd_suite.suite.step.node import NodeOp

OP = "linear"


def backward(*, x, weight, dy, bias):
    """dX = dY W, dW = dY^T X, db = column sums of dY, in the tensors' dtype (PyTorch's
    GEMMs accumulate in fp32 and round once; float64 stays float64)."""
    out = {"dx": dy @ weight, "dweight": dy.t() @ x}
    if bias:
        out["dbias"] = dy.sum(0)
    return out


LOCAL = LocalOp(eager=backward, golden=backward)


def _forward(x, weight, bias):
    rows = x.reshape(-1, x.shape[-1])
    y = F.linear(rows, weight, bias)
    return (y.view(*x.shape[:-1], weight.shape[0]),), {
        "x": rows, "weight": weight, "bias": bias is not None, "shape": tuple(x.shape)}


def _contract(saved, grads, attrs):
    x, w = saved["x"], saved["weight"]
    dy = grads[0].reshape(x.shape[0], w.shape[0]).contiguous()
    params = dict(registry.ops()[OP].params.defaults()) if OP in registry.ops() else {}
    return params, CaseInputs({"x": x, "weight": w, "dy": dy}, {"bias": saved["bias"]})


def _grads(out, saved, attrs):
    return out["dx"].view(saved["shape"]), out["dweight"], out.get("dbias")


LINEAR = NodeOp(OP, _forward, _contract, _grads)
