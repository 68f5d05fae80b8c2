"""This project's CUDA causal conv1d backward (csrc/: the plan in conv1d_bwd_plan.cpp, one
.cu per kernel job), deterministic; built on first use by kernels/cuda_build.py."""

from __future__ import annotations

from pathlib import Path

from bwd_suite.kernels.cuda_build import cuda_only, load_extension
from bwd_suite.suite.registry import implementation

CSRC = Path(__file__).resolve().parent / "csrc"
SOURCES = [CSRC / name for name in (
    "conv1d_bwd_binding.cpp", "conv1d_bwd_plan.cpp", "conv1d_bwd_launch.cpp",
    "conv1d_bwd_channel_first.cu", "conv1d_bwd_channel_last.cu", "conv1d_bwd_dinit.cu",
    "conv1d_bwd_reduce.cu")]
MAX_WIDTH = 4


def extension():
    return load_extension("bwd_suite_causal_conv1d", SOURCES)


MAX_SEQLEN = (1 << 31) - (1 << 16)  # step indices are int in the kernels
MAX_BATCH_CHANNEL_LAST = 65535      # one grid z index a batch


def _supports(p):
    """The binding's limits, as reasons (the binding raises on them)."""
    if p["width"] > MAX_WIDTH:
        return f"width {p['width']} > {MAX_WIDTH}"
    if p["seqlen"] > MAX_SEQLEN:
        return f"seqlen {p['seqlen']} > 2^31 - 2^16"
    if p["layout"] == "channel_last" and p["dim"] > 1 and p["batch"] > MAX_BATCH_CHANNEL_LAST:
        return f"channel-last batch {p['batch']} > {MAX_BATCH_CHANNEL_LAST}"
    return None


@implementation("causal_conv1d", "cuda", kind="ours", supports=_supports,
                deterministic=True,
                build=extension, **cuda_only())
def cuda(*, x, weight, bias, dout, seq_idx, initial_states, dfinal_states, activation, out):
    """CUDA kernel: fp32 math, one rounding at the store, fixed-order dweight/dbias"""
    extension().bwd(x, weight, bias, dout, seq_idx, initial_states, dfinal_states,
                    out["dx"], out["dweight"], out.get("dbias"), out.get("dinitial_states"),
                    activation == "silu")
