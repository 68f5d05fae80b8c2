"""This project's CUDA AdamW (csrc/adamw_step.cu): every tensor of the list in one launch, fp32
math with fp32 moments, optional fp32 master weights, the loss-scale unscale and the
skip on an inf or NaN fused in, and global-norm clipping in the same launch (a persistent
cooperative grid: pass 1 reads the gradients for the skip and the norm, one grid barrier,
pass 2 updates). The norm is reduced in a fixed order: bitwise reproducible on a device.
Built on first use by kernels/cuda_build.py.
"""

from __future__ import annotations

from pathlib import Path

from bwd_suite.kernels.cuda_build import cuda_only, load_extension
from bwd_suite.suite.registry import implementation

CSRC = Path(__file__).resolve().parent / "csrc"
SOURCES = [CSRC / name for name in (
    "adamw_binding.cpp", "adamw_plan.cpp", "adamw_launch.cpp", "adamw_step.cu")]
MAX_STEPS = 16  # kAdamwMaxSteps in csrc/adamw.h


def extension():
    return load_extension("bwd_suite_adamw", SOURCES)


def _supports(p):
    if p["steps"] > MAX_STEPS:
        return f"at most {MAX_STEPS} steps a call (their bias corrections sit in shared memory)"
    return None


@implementation("adamw", "cuda", kind="ours", supports=_supports,
                deterministic=True,
                build=extension, **cuda_only())
def cuda(*, params, grads, master, exp_avg, exp_avg_sq, max_exp_avg_sq, lr, beta1, beta2,
         eps, weight_decay, step, steps, maximize, amsgrad, scaler, loss_scale, max_norm,
         out):
    """CUDA kernel: the whole list in one launch, unscale, skip on inf and clipping fused"""
    extension().step(params, grads, master, exp_avg, exp_avg_sq, max_exp_avg_sq,
                     out["found_inf"], lr, beta1, beta2, eps, weight_decay, step, steps,
                     maximize, amsgrad, scaler, loss_scale, max_norm)
