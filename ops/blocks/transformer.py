"""The Transformer model (GPT-2's pre-norm block): LayerNorm, the q, k, v projection, causal
attention, the output projection and the residual; LayerNorm, the MLP (linear, GELU,
linear) and the residual. Learned positions, biases on every projection.

Saved for the backward per block, N = B T tokens, H heads, b bytes an element
(`saved_bytes`): each LayerNorm's input (N D b) and fp32 mean and rstd (8 N); the qkv
projection's input (N D b); q, k, v laid out per head (3 N D b) with the attention output
(N D b) and its fp32 lse (4 N H); the output projection's input (N D b); the MLP's first
input (N D b), GELU's input (4 N D b) and the second input (4 N D b): N (17 D b + 4 H + 16)
a block (mlp_ratio 4); with dropout each sublayer's mask in the dtype (2 N D b). A
checkpointed block or sublayer keeps its input alone (N D b).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from bwd_suite.ops.blocks import common
from bwd_suite.ops.blocks.nodes import ATTENTION, attention_scale, drop
from bwd_suite.ops.blocks.training import TRAINING
from bwd_suite.suite.params import Param, ParamSet
from bwd_suite.suite.step.models import ModelSpec, register_model
from bwd_suite.suite.step.node import Plan, apply

PARAMS = ParamSet(common.COMMON_PARAMS + (
    Param("heads", "int", 2, "H, attention heads (divides dim)", minimum=1),
    Param("mlp_ratio", "int", 4, "the MLP's width over D", minimum=1),
))


class Attention(nn.Module):
    def __init__(self, p, dtype, device):
        super().__init__()
        D = p["dim"]
        self.heads, self.head_dim = p["heads"], D // p["heads"]
        self.norm = common.LayerNorm(D, dtype, device)
        self.qkv = common.Linear(D, 3 * D, True, dtype, device)
        self.proj = common.Linear(D, D, True, dtype, device)

    def forward(self, x, plan: Plan):
        B, T, D = x.shape
        qkv = self.qkv(self.norm(x, plan), plan).view(B, T, 3, self.heads, self.head_dim)
        # each (B, H, T, d) over a dense (B, T, H, d) buffer: the contract's bshd layout
        q, k, v = (t.contiguous().transpose(1, 2) for t in qkv.unbind(2))
        o = apply(ATTENTION, plan, q, k, v, scale=attention_scale(self.head_dim))
        return self.proj(o.transpose(1, 2).reshape(B, T, D), plan)


class MLP(nn.Module):
    def __init__(self, p, dtype, device):
        super().__init__()
        D, W = p["dim"], p["mlp_ratio"] * p["dim"]
        self.norm = common.LayerNorm(D, dtype, device)
        self.fc1 = common.Linear(D, W, True, dtype, device)
        self.fc2 = common.Linear(W, D, True, dtype, device)

    def forward(self, x, plan: Plan):
        return self.fc2(F.gelu(self.fc1(self.norm(x, plan), plan)), plan)


class Block(nn.Module):
    def __init__(self, p, dtype, device):
        super().__init__()
        self.attention = Attention(p, dtype, device)
        self.mlp = MLP(p, dtype, device)
        self.dropout = p["dropout"]

    def forward(self, x, plan: Plan):
        x = x + drop(plan.layer("attention", self.attention, x, plan), self.dropout)
        return x + drop(plan.layer("mlp", self.mlp, x, plan), self.dropout)


def build(p, dtype, device) -> nn.Module:
    return common.LM(p, lambda i: Block(p, dtype, device), dtype, device, positions=p["seq"])


def check(p):
    if p["dim"] % p["heads"]:
        return "heads", f"{p['heads']} heads do not divide dim {p['dim']}"
    return common.check_common(p)


def saved_bytes(p, batch: int, seq: int, dtype, checkpoint: frozenset) -> int:
    """What the graph keeps from the forward to the backward (module docstring)."""
    b = torch.finfo(dtype).bits // 8
    N, D, H, V = batch * seq, p["dim"], p["heads"], p["vocab"]
    W = p["mlp_ratio"] * D
    attention = N * (D * b + 8 + D * b + 3 * D * b + D * b + 4 * H + D * b)
    mlp = N * (D * b + 8 + D * b + 2 * W * b)
    if "block" in checkpoint:
        attention, mlp = N * D * b, 0
    else:
        attention = N * D * b if "attention" in checkpoint else attention
        mlp = N * D * b if "mlp" in checkpoint else mlp
    block = attention + mlp
    if p["dropout"] and "block" not in checkpoint:
        block += 2 * N * D * b  # each sublayer's keep mask in the dtype, which x * mask saves
    head = N * D * b + 8 * N + N * D * b
    return p["layers"] * block + head + N * V * b


SPEC = register_model(ModelSpec(
    name="transformer",
    doc="GPT-2-style blocks: LayerNorm, causal attention, MLP with GELU, residuals",
    params=PARAMS,
    check=check,
    layers=("block", "attention", "mlp"),
    ops=("layer_norm", "linear", "attention"),
    init=lambda p, seed: common.init(build, p, seed),
    build=build,
    training=TRAINING,
    saved_bytes=saved_bytes,
    layer_modules={"block": r"\.blocks\.\d+$", "attention": r"\.blocks\.\d+\.attention$",
                   "mlp": r"\.blocks\.\d+\.mlp$"},
    draws=lambda p: p["dropout"] > 0,
    depth=lambda p: p["layers"],
))
