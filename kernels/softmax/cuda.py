"""This project's CUDA softmax backward along the last dim with the dropout backward fused
(csrc/: the plan in softmax_bwd_plan.cpp, one .cu per kernel job), deterministic; built on
first use by kernels/cuda_build.py.

One warp per row for rows of up to 256 fp32 / 512 fp16-bf16 elements (1024 / 2048 where
rows are not 16-byte aligned), one block per row beyond; y, dy and the keep mask are read
once into registers (rows over 16384 fp32 / 32768 16-bit elements, or half that where rows
are not 16-byte aligned, read the part that does not fit twice), one fp32 row reduction in
a fixed order, one rounding at the store. The binding takes any row strides but needs the
last dim contiguous: every layout `ops/softmax.make_inputs` produces is contiguous (rows,
N), so no case is unsupported; a non-contiguous last dim raises with the reason.
"""

from __future__ import annotations

from pathlib import Path

from bwd_suite.kernels.cuda_build import cuda_only, load_extension
from bwd_suite.suite.registry import implementation

CSRC = Path(__file__).resolve().parent / "csrc"
SOURCES = [CSRC / name for name in (
    "softmax_bwd_binding.cpp", "softmax_bwd_plan.cpp", "softmax_bwd_launch.cpp",
    "softmax_bwd_rows.cu", "softmax_bwd_split.cu")]


def extension():
    return load_extension("bwd_suite_softmax", SOURCES)


def _supports(p):
    """Every case: make_inputs gives contiguous (rows, N) tensors, dtypes fp32/fp16/bf16."""
    return None


@implementation("softmax", "cuda", kind="ours", supports=_supports,
                deterministic=True,
                build=extension, **cuda_only())
def cuda(*, y, dy, mask, scale, out):
    """CUDA kernel: fused dropout backward, fp32 row reduction, one rounding at the store"""
    extension().bwd(y, dy, mask, scale, out["dx"])
