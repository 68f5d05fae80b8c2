"""Adapter for Dao-AILab's causal-conv1d package (its backward op `_causal_conv1d_bwd_cpp`,
called as its wrapper `causal_conv1d_bwd_function` calls it, into the suite's outputs).

Used when the package imports (a CUDA machine where scripts/install_dao.sh built it),
registered disabled with the reason otherwise. Two implementations: `dao` in its default
mode (atomicAdd reductions) and `dao_det` with CAUSAL_CONV1D_DETERMINISTIC=1 (workspace
reductions, v1.6.0+).
"""

from __future__ import annotations

import contextlib
import os

import torch

from bwd_suite.kernels.vendor import not_importable
from bwd_suite.suite.registry import implementation

try:
    import causal_conv1d as _pkg
    # the custom op behind its wrapper causal_conv1d_bwd_function (1.7.0): it writes into
    # the destinations it is given
    from causal_conv1d.cpp_functions import _causal_conv1d_bwd_cpp

    VERSION, WHY_NOT = _pkg.__version__, ""
except Exception as e:  # noqa: BLE001 - ImportError, or a build for another torch/arch
    _causal_conv1d_bwd_cpp = None
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
    if p["dout_layout"] == "sliced" and p["dtype"] in ("float16", "bfloat16"):
        # The sliced dout starts 4 elements (8 bytes) into its buffer. Measured on the H200
        # (1.7.0), channel-last by the gpu profile and channel-first by the fuzzer:
        # cudaErrorMisalignedAddress, which is sticky, so every later item of the same
        # process failed with it too.
        return ("a 16-bit dout not 16-byte aligned (dout_layout 'sliced'): its vector loads "
                "do not check alignment and fault (misaligned address, a sticky CUDA error "
                "that would fail every later item of the process)")
    if p["layout"] == "channel_last" and p["dout_layout"] == "other":
        # fuzzed on the H200: its wrapper raises (a channel-first dout has stride 1 in time)
        return "a channel-last x with a channel-first dout: its wrapper needs dout's strides "\
               "over batch and time to be multiples of 8"
    if p["layout"] == "channel_first" and p["dim"] > 65535:
        # fuzzed on the H200: cudaErrorInvalidValue at the launch, no check before it
        return "channel-first with more than 65535 channels: its grid puts them on the "\
               "y dimension (at most 65535) and the launch fails with invalid argument"
    return None


# Its backward treats seq_idx < 0 (padding) as an ordinary id: its forward outputs 0 at
# padding steps, but the backward neither zeroes dout there nor drops those steps' terms,
# so dx, dweight and dbias differ from the reference (reference/causal_conv1d.md, padding
# tokens). Measured on the H200 (1.7.0): all 12 padding cases of the gpu profile that it
# supports, both modes, dx errors 0.59-1.17 of max|golden|.
KNOWN_FAILURES = {
    "-pack-padding": "padding ids (seq_idx < 0) are treated as an ordinary sequence id in the "
                     "backward (dout not zeroed at padding steps)",
    # fuzzed on the H200 (cases/causal_conv1d/findings.toml, both modes): 37% of the drawn
    # cases with a contiguous dfinal_states fail (so not every such case: only the finding
    # is declared), dx wrong in the last steps
    "causal_conv1d/dao-dfinal-contiguous/": "a contiguous (B, D, K-1) dfinal_states: dx "
                                            "wrong in the last K-1 steps",
    "causal_conv1d/dao-cf-bf16-step-l-2/": "channel-first bf16, width 2, L = 1025: dx wrong "
                                           "at step L-2 (also L = 2049, 131073)",
}


def _fp32_zeros_for(dst: torch.Tensor) -> torch.Tensor:
    """Where Dao accumulates dweight or dbias: fp32 zeros, `dst` itself when it is fp32."""
    acc = dst if dst.dtype == torch.float32 else torch.empty(
        dst.shape, dtype=torch.float32, device=dst.device)
    return acc.zero_()


def _call(x, weight, bias, dout, seq_idx, initial_states, dfinal_states, activation, out):
    """The GPU work of Dao's wrapper (causal_conv1d_bwd_function: fp32 zeros, the kernel,
    casts to the parameters' dtypes) into the suite's outputs. Through the wrapper, its
    results were copied into `out` inside the timed call: one or more extra small kernels
    that Dao's own callers do not run."""
    dw = _fp32_zeros_for(out["dweight"])
    db = _fp32_zeros_for(out["dbias"]) if bias is not None else None
    dinit = None
    if initial_states is not None:
        dinit = out["dinitial_states"]
        if dinit.stride(1) != 1:  # its kernel writes the states channel-last, as it allocates them
            b, d, w1 = dinit.shape
            dinit = torch.empty(b, w1, d, dtype=dinit.dtype, device=dinit.device).transpose(1, 2)
    _causal_conv1d_bwd_cpp(x=x, weight=weight, bias=bias, dout=dout, seq_idx=seq_idx,
                           initial_states=initial_states, dfinal_states=dfinal_states,
                           dx=out["dx"], dweight=dw, dbias=db, dinitial_states=dinit,
                           silu_activation=activation == "silu")
    for name, result in (("dweight", dw), ("dbias", db), ("dinitial_states", dinit)):
        if result is not None and result is not out[name]:
            out[name].copy_(result)


_common = dict(kind="vendor", devices=("cuda",), supports=supports, version=VERSION,
               enabled=not WHY_NOT, disabled_reason=WHY_NOT, known_failures=KNOWN_FAILURES)


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
