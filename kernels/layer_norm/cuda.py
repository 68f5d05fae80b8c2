"""This project's CUDA LayerNorm backward (csrc/: the plan in layer_norm_bwd_plan.cpp, one
.cu per kernel job), deterministic; built on first use by kernels/cuda_build.py.

dx in the x-hat form from the saved fp32 mean and rstd, x and dy read from memory once per
row, both row sums in one reduction, fp32 math with one rounding at the store. Row groups
of 32-1024 threads; aligned rows of up to 8192 columns stream through a shared-memory
cp.async ring with the next rows in flight (kernels/common/csrc/row_pipeline.cuh).
dgamma/dbeta by per-block partial column sums in a workspace, added in a fixed order by a
second kernel (no atomics), launched as a programmatic dependent of the first.
"""

from __future__ import annotations

from pathlib import Path

from bwd_suite.kernels.cuda_build import cuda_only, load_extension
from bwd_suite.suite.registry import implementation

CSRC = Path(__file__).resolve().parent / "csrc"
SOURCES = [CSRC / name for name in (
    "layer_norm_bwd_binding.cpp", "layer_norm_bwd_plan.cpp", "layer_norm_bwd_launch.cpp",
    "layer_norm_bwd_piped.cu", "layer_norm_bwd_rows.cu", "layer_norm_bwd_cols.cu")]


def extension():
    return load_extension("bwd_suite_layer_norm", SOURCES)


@implementation("layer_norm", "cuda", kind="ours", deterministic=True,
                build=extension, **cuda_only())
def cuda(*, x, dy, gamma, mean, rstd, out):
    """CUDA kernel: x-hat form, one paired row reduction, fixed-order dgamma/dbeta"""
    extension().bwd(x, dy, gamma, mean, rstd, out["dx"], out.get("dgamma"), out.get("dbeta"))
