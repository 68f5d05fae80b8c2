"""The Mamba-style model: blocks of LayerNorm, an input projection to 2E channels split into
u and z, the causal depthwise conv1d with SiLU along time on u (Dao's layout: channel-last
views of the projection, as Mamba feeds causal_conv1d_fn), the gate u' * silu(z), the
output projection back to D, and the residual. (No selective scan: it is not an op of the
suite.) The conv carries state along the sequence: with Plan.chunks it runs chunk by
chunk, each chunk's initial states the previous chunk's last K-1 inputs.

Saved for the backward per block, N = B T tokens, b bytes an element (`saved_bytes`):
the LayerNorm's input (N D b) and fp32 mean and rstd (8 N), the in-projection's input
(N D b) and output (N 2E b: the conv's input is a view of it, so is z), the conv's output
(N E b) and silu(z) (N E b) for the gate's product, and the gate's output (N E b) for the
out-projection: N (2 D b + 5 E b + 8) a block; with dropout its mask in the dtype (N D b).
A checkpointed block or mixer keeps its input alone (N D b). Then the final LayerNorm's
input and statistics, the output projection's input, and the loss's dlogits (N V b).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from bwd_suite.ops.blocks import common
from bwd_suite.ops.blocks.nodes import CAUSAL_CONV1D, conv_chunks, drop
from bwd_suite.ops.blocks.training import TRAINING
from bwd_suite.suite.params import Param, ParamSet
from bwd_suite.suite.step.models import ModelSpec, register_model
from bwd_suite.suite.step.node import Plan, apply

PARAMS = ParamSet(common.COMMON_PARAMS + (
    Param("expand", "int", 2, "E = expand * D, the channels of the conv", minimum=1),
    Param("width", "int", 4, "K, the conv's filter width", minimum=2),
))


class Mixer(nn.Module):
    """LayerNorm -> in-projection -> conv1d + SiLU on u -> gate by silu(z) -> out-projection."""

    def __init__(self, p, dtype, device):
        super().__init__()
        D, E, K = p["dim"], p["expand"] * p["dim"], p["width"]
        self.E = E
        self.norm = common.LayerNorm(D, dtype, device)
        self.in_proj = common.Linear(D, 2 * E, False, dtype, device)
        self.conv_weight = nn.Parameter(torch.empty(E, K, dtype=dtype, device=device))
        self.conv_bias = nn.Parameter(torch.empty(E, dtype=dtype, device=device))
        self.out_proj = common.Linear(E, D, False, dtype, device)

    def forward(self, x, plan: Plan):
        xz = self.in_proj(self.norm(x, plan), plan)  # (B, T, 2E)
        u, z = xz.split(self.E, dim=-1)
        uc = u.transpose(1, 2)  # (B, E, T), E fastest: channel-last, a slice of xz
        if plan.chunks:
            c = conv_chunks(uc, self.conv_weight, self.conv_bias,
                            lambda node, *a, **k: apply(node, plan, *a, **k), plan.chunks)
        else:
            c = apply(CAUSAL_CONV1D, plan, uc, self.conv_weight, self.conv_bias, None,
                      activation="silu")
        return self.out_proj(c.transpose(1, 2) * F.silu(z), plan)


class Block(nn.Module):
    def __init__(self, p, dtype, device):
        super().__init__()
        self.mixer = Mixer(p, dtype, device)
        self.dropout = p["dropout"]

    def forward(self, x, plan: Plan):
        return x + drop(plan.layer("mixer", self.mixer, x, plan), self.dropout)


def build(p, dtype, device) -> nn.Module:
    return common.LM(p, lambda i: Block(p, dtype, device), dtype, device)


def check(p):
    return common.check_common(p)


def saved_bytes(p, batch: int, seq: int, dtype, checkpoint: frozenset) -> int:
    """What the graph keeps from the forward to the backward (module docstring), by the
    layers the plan recomputes: a checkpointed block or mixer keeps only its input."""
    b = torch.finfo(dtype).bits // 8
    N, D, E, V = batch * seq, p["dim"], p["expand"] * p["dim"], p["vocab"]
    block = N * (2 * D * b + 5 * E * b + 8)
    if "block" in checkpoint or "mixer" in checkpoint:
        block = N * D * b  # the input the recomputation starts from
    if p["dropout"] and "block" not in checkpoint:
        block += N * D * b  # the keep mask in the dtype, which x * mask saves
    head = N * D * b + 8 * N + N * D * b  # the final LayerNorm's input and stats, the head's
    return p["layers"] * block + head + N * V * b  # + the loss's dlogits


SPEC = register_model(ModelSpec(
    name="mamba",
    doc="Mamba-style blocks: LayerNorm, in-projection, causal conv1d + SiLU, gate, "
        "out-projection",
    params=PARAMS,
    check=check,
    layers=("block", "mixer"),
    ops=("layer_norm", "linear", "causal_conv1d"),
    init=lambda p, seed: common.init(build, p, seed),
    build=build,
    training=TRAINING,
    saved_bytes=saved_bytes,
    layer_modules={"block": r"\.blocks\.\d+$", "mixer": r"\.blocks\.\d+\.mixer$"},
    stateful=True,
    draws=lambda p: p["dropout"] > 0,
    depth=lambda p: p["layers"],
))
