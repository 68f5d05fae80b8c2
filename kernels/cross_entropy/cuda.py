"""This project's CUDA cross entropy, forward and backward in one call: each row of logits
read once into shared memory (a cluster of CTAs for long rows, csrc/
cross_entropy_resident.cu), or, for rows not of 16-byte vectors, streamed twice by one
block (csrc/cross_entropy_rows.cu); fp32 arithmetic, one rounding at the store. The shift is
its own entry point (position t scored against the label of t + 1 in the kernel, no
shifted copy of the targets); the non-ignored count and the loss's sum are kernels on the
device, in a fixed order: no atomics, no host sync, bitwise reproducible. Built on first
use by kernels/cuda_build.py."""

from __future__ import annotations

from pathlib import Path

from bwd_suite.kernels.cuda_build import cuda_only, load_extension
from bwd_suite.suite.registry import implementation

CSRC = Path(__file__).resolve().parent / "csrc"
SOURCES = [CSRC / name for name in (
    "cross_entropy_binding.cpp", "cross_entropy_plan.cpp", "cross_entropy_launch.cpp",
    "cross_entropy_count.cu", "cross_entropy_resident.cu", "cross_entropy_rows.cu",
    "cross_entropy_loss.cu")]


def extension():
    return load_extension("bwd_suite_cross_entropy", SOURCES)


@implementation("cross_entropy", "cuda", kind="ours", deterministic=True,
                build=extension, **cuda_only())
def cuda(*, logits, targets, grad_loss, ignore_index, label_smoothing, reduction, z_loss,
         softcap, shift, seq_len, out):
    """CUDA kernel: each row read once (held on chip); count and loss sum on the device"""
    extension().fwd_bwd(logits, targets, grad_loss, out["loss"], out["dlogits"], ignore_index,
                        label_smoothing, reduction, z_loss, softcap, shift, seq_len)
