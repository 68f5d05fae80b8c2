"""Build this project's CUDA extensions with torch.utils.cpp_extension, once per process.

Each kernel folder has torch-free sources (the kernels' `.cu` files, compiled with nvcc
alone in CI by tests/cuda/test_cuda_sources.py, and the host planning `.cpp` files) and a thin
binding `.cpp`. The extension is compiled on first use for the current GPU's architecture
(sm_90 on Hopper; BWD_SUITE_CUDA_ARCH=90 overrides), cached by torch in
TORCH_EXTENSIONS_DIR, and built ahead of a run by `python -m bwd_suite prebuild`. A failed
build is remembered, so every later item reports the same error instead of compiling again.
"""

from __future__ import annotations

import glob
import os
import sys
from pathlib import Path
from typing import Sequence

import torch

NVCC_FLAGS = ["-O3", "-std=c++17", "--use_fast_math", "-lineinfo"]

_built: dict[str, object] = {}


def cuda_only() -> dict:
    """The registration keywords of an implementation that needs a CUDA device: disabled,
    with the reason, where there is none."""
    here = torch.cuda.is_available()
    return {"devices": ("cuda",), "enabled": here,
            "disabled_reason": "" if here else "no CUDA device here"}


def cuda_arch() -> str:
    if os.environ.get("BWD_SUITE_CUDA_ARCH"):
        return os.environ["BWD_SUITE_CUDA_ARCH"]
    major, minor = torch.cuda.get_device_capability()
    return f"{major}{minor}"


def _library_roots() -> list[Path]:
    """Where CUDA's libraries may be: the toolkit (CUDA_HOME, /usr/local/cuda), and the
    NVIDIA wheels a CUDA build of torch installs beside it (site-packages/nvidia/*)."""
    roots = [Path(p) for p in (os.environ.get("CUDA_HOME", ""), "/usr/local/cuda") if p]
    for site in sys.path:
        roots += [Path(p) for p in sorted(glob.glob(os.path.join(site, "nvidia", "*")))]
    return roots


def cuda_library(header: str, library: str) -> tuple[list[str], list[str]]:
    """(include folders, linker flags) for a CUDA library such as cuBLASLt
    (`cuda_library("cublasLt.h", "cublasLt")`): the folder of its header and the path of
    its shared object (a wheel ships only libcublasLt.so.13, which -l cannot name), with
    an rpath to it. Empty where it is not found (the build then says what is missing)."""
    includes, flags = [], []
    for root in _library_roots():
        if not includes and (root / "include" / header).exists():
            includes.append(str(root / "include"))
        if not flags:
            for lib in ("lib64", "lib"):
                found = sorted(glob.glob(str(root / lib / f"lib{library}.so*")))
                if found:
                    flags = [found[0], f"-Wl,-rpath,{root / lib}"]
                    break
    return includes, flags


def load_extension(name: str, sources: list[Path], include_dirs: Sequence[str] = (),
                   ldflags: Sequence[str] = ()):
    """The compiled module `name` built from `sources` (their folder is on the include
    path, with `include_dirs`), linked with `ldflags`."""
    key = name
    if isinstance(_built.get(key), BaseException):
        raise RuntimeError(str(_built[key]))
    if key in _built:
        return _built[key]
    from torch.utils.cpp_extension import load

    arch = cuda_arch()
    try:
        _built[key] = load(
            name=f"{name}_sm{arch}",
            sources=[str(s) for s in sources],
            extra_include_paths=sorted({str(Path(s).parent) for s in sources})
            + list(include_dirs),
            extra_ldflags=list(ldflags),
            extra_cflags=["-O3"],
            extra_cuda_cflags=NVCC_FLAGS + [f"-gencode=arch=compute_{arch},code=sm_{arch}"],
            verbose=os.environ.get("BWD_SUITE_BUILD_VERBOSE") == "1",
        )
    except Exception as e:  # noqa: BLE001 - kept for the error rows of every later item
        _built[key] = RuntimeError(f"building {name} failed: {type(e).__name__}: {e}")
        raise RuntimeError(str(_built[key])) from e
    return _built[key]
