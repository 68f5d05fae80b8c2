"""What the scenario models share: the LayerNorm and linear modules over their op nodes, the
language-model frame (token embedding, blocks, final LayerNorm, output projection), the
parameter initialisation and the keys every model has."""

from __future__ import annotations

import re
from typing import Callable, Mapping

import torch
import torch.nn.functional as F
from torch import nn

from bwd_suite.ops.blocks.linear import LINEAR
from bwd_suite.ops.blocks.nodes import LAYER_NORM
from bwd_suite.suite import inputs as mk
from bwd_suite.suite.params import Param
from bwd_suite.suite.step.node import Plan, apply

LN_EPS = 1e-5

COMMON_PARAMS = (
    Param("vocab", "int", 64, "V, the vocabulary (the logits' width)", minimum=2),
    Param("dim", "int", 32, "D, the model width", minimum=1),
    Param("layers", "int", 2, "blocks", minimum=1),
    Param("dropout", "float", 0.0, "residual dropout after each sublayer (its mask drawn "
          "in fp32 from the seeded RNG, the same in every run)", minimum=0.0),
    Param("tie", "bool", False, "the output projection is the token embedding"),
)


def check_common(p: Mapping):
    if not p["dropout"] < 1:
        return "dropout", f"{p['dropout']!r} must be in [0, 1)"
    return None


class LayerNorm(nn.Module):
    def __init__(self, dim: int, dtype, device):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim, dtype=dtype, device=device))
        self.bias = nn.Parameter(torch.zeros(dim, dtype=dtype, device=device))

    def forward(self, x, plan: Plan):
        return apply(LAYER_NORM, plan, x, self.weight, self.bias, eps=LN_EPS)


class Linear(nn.Module):
    def __init__(self, n_in: int, n_out: int, bias: bool, dtype, device):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_out, n_in, dtype=dtype, device=device))
        self.bias = nn.Parameter(torch.zeros(n_out, dtype=dtype, device=device)) \
            if bias else None

    def forward(self, x, plan: Plan):
        return apply(LINEAR, plan, x, self.weight, self.bias)


class LM(nn.Module):
    """tokens (B, T) -> logits (B * T, V): embedding (+ positions), the blocks, a final
    LayerNorm and the output projection (the embedding when tied). Each block is a layer
    of kind "block" (recomputed in the backward when the plan checkpoints blocks)."""

    def __init__(self, p: Mapping, make_block: Callable, dtype, device, positions: int = 0):
        super().__init__()
        V, D = p["vocab"], p["dim"]
        self.embed = nn.Parameter(torch.empty(V, D, dtype=dtype, device=device))
        self.pos = nn.Parameter(torch.empty(positions, D, dtype=dtype, device=device)) \
            if positions else None
        self.blocks = nn.ModuleList(make_block(i) for i in range(p["layers"]))
        self.norm = LayerNorm(D, dtype, device)
        self.head = None if p["tie"] else Linear(D, V, False, dtype, device)

    def forward(self, tokens, plan: Plan):
        x = F.embedding(tokens, self.embed)
        if self.pos is not None:
            x = x + self.pos[:tokens.shape[1]]
        for block in self.blocks:
            x = plan.layer("block", block, x, plan)
        h = self.norm(x, plan)
        logits = apply(LINEAR, plan, h, self.embed, None) if self.head is None \
            else self.head(h, plan)
        return logits.reshape(-1, logits.shape[-1])


# the initial value of a parameter by its name: (pattern, mean, standard deviation)
INIT_RULES = (
    (r"norm\d*\.weight$", 1.0, 0.1),
    (r"conv_weight$", 0.0, 0.5),
    (r"\.bias$|conv_bias$", 0.0, 0.02),
    (r"^pos$", 0.0, 0.01),
    (r".*", 0.0, 0.02),
)


def init(build: Callable, p: Mapping, seed: int) -> dict:
    """{name: fp32 tensor} for the model `build(p, dtype, device)` makes, each drawn by
    INIT_RULES from the scenario's seed and rounded to the scenario's dtype: every run (and
    the float64 shadow) starts from values its dtype holds exactly."""
    dtype = mk.DTYPES[p["dtype"]]
    shapes = {n: t.shape for n, t in build(p, torch.float32, torch.device("meta"))
              .named_parameters()}
    gen = mk.generator(seed)
    out = {}
    for name, shape in shapes.items():
        mean, std = next((m, s) for pat, m, s in INIT_RULES if re.search(pat, name))
        x = mk.randn(shape, torch.float32, gen, torch.device("cpu"), scale=std) + mean
        out[name] = x.to(dtype).float()
    return out
