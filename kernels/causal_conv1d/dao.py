"""Adapter for Dao-AILab's causal-conv1d package (`causal_conv1d_bwd_function`).

Used when the package imports (a CUDA machine where scripts/install_dao.sh built it),
registered disabled with the reason otherwise. Two implementations: `dao` in its default
mode (atomicAdd reductions) and `dao_det` with CAUSAL_CONV1D_DETERMINISTIC=1 (workspace
reductions, v1.6.0+).
"""

from __future__ import annotations

import contextlib
import os

from kernels.vendor import not_importable
from suite.registry import implementation

try:
    import causal_conv1d as _pkg
    from causal_conv1d.cpp_functions import causal_conv1d_bwd_function

    VERSION, WHY_NOT = _pkg.__version__, ""
except Exception as e:  # noqa: BLE001 - ImportError, or a build for another torch/arch
    VERSION, WHY_NOT = "", not_importable("causal_conv1d", e,
                                          "scripts/install_dao.sh builds it from the sdist")


def supports(p) -> str | None:
    """Dao's documented limits (reference/causal_conv1d.md section 1.4)."""
    if p["width"] > 4:
        return "widths 2-4 only"
    if p["layout"] == "channel_first" and (p["seq_idx"] != "none" or p["initial_states"]
                                           or p["final_states"] or p["chunks"]):
        return "channel-first takes no seq_idx, initial or final states"
    if p["seq_idx"] != "none" and p["final_states"]:
        return "seq_idx with final states is refused by its forward"
    if p["layout"] == "channel_last" and p["dim"] % 8:
        return "channel-last needs dim % 8 == 0"
    return None


def _call(x, weight, bias, dout, seq_idx, initial_states, dfinal_states, activation, out):
    _, dw, db, dinit = causal_conv1d_bwd_function(
        x, weight, bias, dout, seq_idx, initial_states, dfinal_states, out["dx"],
        initial_states is not None, activation == "silu")
    out["dweight"].copy_(dw)
    if bias is not None:
        out["dbias"].copy_(db)
    if initial_states is not None:
        out["dinitial_states"].copy_(dinit)


_common = dict(kind="vendor", devices=("cuda",), supports=supports, version=VERSION,
               enabled=not WHY_NOT, disabled_reason=WHY_NOT)


@contextlib.contextmanager
def _deterministic_mode(on: bool):
    """Dao's C++ reads CAUSAL_CONV1D_DETERMINISTIC on every call ('1' on, '0' off)."""
    old = os.environ.get("CAUSAL_CONV1D_DETERMINISTIC")
    os.environ["CAUSAL_CONV1D_DETERMINISTIC"] = "1" if on else "0"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("CAUSAL_CONV1D_DETERMINISTIC", None)
        else:
            os.environ["CAUSAL_CONV1D_DETERMINISTIC"] = old


@implementation("causal_conv1d", "dao", deterministic=False, **_common)
def dao(**kw):
    """Dao's causal-conv1d backward, default mode (atomicAdd dweight/dbias)"""
    with _deterministic_mode(False):
        _call(**kw)


@implementation("causal_conv1d", "dao_det", deterministic=True, **_common)
def dao_det(**kw):
    """Dao's causal-conv1d backward, deterministic mode (workspace reductions)"""
    with _deterministic_mode(True):
        _call(**kw)
