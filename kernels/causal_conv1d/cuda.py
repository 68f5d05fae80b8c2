"""This project's CUDA causal conv1d backward (csrc/conv1d_bwd.cu), deterministic.

Built with torch.utils.cpp_extension on first use for the current GPU's architecture
(sm_90 on Hopper; BWD_SUITE_CUDA_ARCH=90 overrides) and cached by torch in
TORCH_EXTENSIONS_DIR; `python -m suite prebuild` builds it ahead of a run.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from suite.registry import implementation

CSRC = Path(__file__).resolve().parent / "csrc"
SOURCES = [CSRC / "conv1d_bwd_binding.cpp", CSRC / "conv1d_bwd.cu"]
NVCC_FLAGS = ["-O3", "-std=c++17", "--use_fast_math", "-lineinfo"]
MAX_WIDTH = 4

_built = {}


def _arch() -> str:
    if os.environ.get("BWD_SUITE_CUDA_ARCH"):
        return os.environ["BWD_SUITE_CUDA_ARCH"]
    major, minor = torch.cuda.get_device_capability()
    return f"{major}{minor}"


def extension():
    """The compiled module; a failed build is remembered, not retried on every call."""
    if "module" in _built:
        return _built["module"]
    if "error" in _built:
        raise RuntimeError(_built["error"])
    from torch.utils.cpp_extension import load

    arch = _arch()
    try:
        _built["module"] = load(
            name=f"bwd_suite_causal_conv1d_sm{arch}",
            sources=[str(s) for s in SOURCES],
            extra_include_paths=[str(CSRC)],
            extra_cflags=["-O3"],
            extra_cuda_cflags=NVCC_FLAGS + [f"-gencode=arch=compute_{arch},code=sm_{arch}"],
            verbose=os.environ.get("BWD_SUITE_BUILD_VERBOSE") == "1",
        )
    except Exception as e:  # noqa: BLE001 - kept for the error rows of every later item
        _built["error"] = f"building {SOURCES[1].name} failed: {type(e).__name__}: {e}"
        raise RuntimeError(_built["error"]) from e
    return _built["module"]


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
