"""This project's CUDA causal conv1d backward (csrc/conv1d_bwd.cu), deterministic; built
on first use by kernels/cuda_build.py."""

from __future__ import annotations

from pathlib import Path

import torch

from kernels.cuda_build import load_extension
from suite.registry import implementation

CSRC = Path(__file__).resolve().parent / "csrc"
SOURCES = [CSRC / "conv1d_bwd_binding.cpp", CSRC / "conv1d_bwd.cu"]
MAX_WIDTH = 4


def extension():
    return load_extension("bwd_suite_causal_conv1d", SOURCES)


def _supports(p):
    return f"width {p['width']} > {MAX_WIDTH}" if p["width"] > MAX_WIDTH else None


@implementation("causal_conv1d", "cuda", kind="ours", devices=("cuda",), supports=_supports,
                deterministic=True, enabled=torch.cuda.is_available(),
                disabled_reason="" if torch.cuda.is_available() else "no CUDA device here",
                build=extension)
def cuda(*, x, weight, bias, dout, seq_idx, initial_states, dfinal_states, activation, out):
    """CUDA kernel: fp32 math, one rounding at the store, fixed-order dweight/dbias"""
    extension().bwd(x, weight, bias, dout, seq_idx, initial_states, dfinal_states,
                    out["dx"], out["dweight"], out.get("dbias"), out.get("dinitial_states"),
                    activation == "silu")
