"""The linear node: y = x W^T + b, its forward PyTorch's F.linear.

Its backward goes through the same per-op choice as every node: the `linear` op's
contract (ops/linear.py), with no activation of its own (the blocks apply theirs as
PyTorch ops); dx, dw and db are the op's outputs.
"""

from __future__ import annotations

import torch.nn.functional as F

from bwd_suite.ops.blocks.nodes import op_params
from bwd_suite.suite.opspec import CaseInputs
from bwd_suite.suite.step.node import NodeOp

OP = "linear"


def _forward(x, weight, bias):
    rows = x.reshape(-1, x.shape[-1])
    y = F.linear(rows, weight, bias)
    return (y.view(*x.shape[:-1], weight.shape[0]),), {
        "x": rows, "weight": weight, "bias": bias, "shape": tuple(x.shape)}


def _contract(saved, grads, attrs):
    x, w, b = saved["x"], saved["weight"], saved["bias"]
    dy = grads[0].reshape(x.shape[0], w.shape[0]).contiguous()
    p = op_params(OP, x, m=x.shape[0], n=w.shape[0], k=x.shape[1], bias=b is not None)
    return p, CaseInputs({"x": x, "w": w, "dy": dy, "bias": b, "z": None, "a": None},
                         {"activation": "none", "approximate": "none", "act_at": "output"})


def _grads(out, saved, attrs):
    return out["dx"].view(saved["shape"]), out["dw"], out.get("db")


def _native(x, weight, bias):
    return _forward(x, weight, bias)[0]


LINEAR = NodeOp(OP, _forward, _contract, _grads, _native)
