"""Shared by the vendor adapters: the installed version of a package, and the one-line
reason an adapter is disabled."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def package_version(dist: str) -> str:
    """Installed version of distribution `dist`; "" for a source checkout without metadata."""
    try:
        return version(dist)
    except PackageNotFoundError:
        return ""


def not_importable(package: str, error: BaseException, how: str) -> str:
    return f"{package} is not importable ({type(error).__name__}: {error}); {how}"


LIGER_HOW = ("carry .whl/liger_kernel-*.whl to a CUDA machine with triton "
             "(scripts/fetch_gpu_deps.sh)")
