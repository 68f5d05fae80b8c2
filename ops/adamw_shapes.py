"""The parameter list an adamw case describes: named presets and the shapes of its
tensors. The op (ops/adamw.py) draws its inputs over them and the diagnosis
(ops/adamw_diagnosis.py) counts them, so both import them from here."""

from __future__ import annotations

from typing import Mapping

# Parameter lists by name (shapes). gpt2_large: GPT-2 large's 436 tensors (774M
# parameters: 36 layers of 12, the two embeddings and the final LayerNorm).
_GPT2_LAYER = [(1280,), (1280,), (1280, 3840), (3840,), (1280, 1280), (1280,), (1280,),
               (1280,), (1280, 5120), (5120,), (5120, 1280), (1280,)]
PRESETS = {
    "mixed": [(4, 8), (8,), (3, 5, 7), (1,), (130,), (2, 1, 33)],
    "tiny_many": [(7,)] * 24 + [(1,)] * 8,
    "gpt2_large": [(50257, 1280), (1024, 1280)] + _GPT2_LAYER * 36 + [(1280,), (1280,)],
}


def shapes(p: Mapping) -> list:
    one = list(PRESETS[p["preset"]]) if p["preset"] else [(n,) for n in p["sizes"]]
    return one * p["repeat"]
