"""Ours: the linear backward through cuBLASLt with its epilogues (csrc/: the plan in
linear_bwd_plan.cpp, the cuBLASLt calls in linear_bwd_launch.cpp, the elementwise jobs in a
.cu each), built on first use by kernels/cuda_build.py and linked with cuBLASLt.

What is fused where (ops/linear.py says why):
- activation on the input: dx = (dY w) act'(x) by the dgrad GEMM's DGELU (tanh GELU; aux:
  the pre-GELU x) or DRELU (aux: x's ReLU bitmask) epilogue; db = Σ dY by the wgrad GEMM's
  BGRADB (BGRADA when dw is stored transposed);
- activation after the GEMM: dZ = dY act'(Z) is one elementwise kernel of ours (it feeds
  both GEMMs, which no epilogue can), then the two GEMMs, db = Σ dZ by BGRAD on wgrad; a
  recomputed Z comes from a GEMM with the BIAS epilogue;
- no activation: the two GEMMs, db by BGRAD.
cuBLASLt has no derivative epilogue for the erf GELU (its DGELU is the tanh form) or for
SiLU: those cases on the input are unsupported, with that reason.

Two-phase (docs/contract.md#two-phase-implementations): `prepare` leaves what a forward
that used cuBLASLt's *_AUX epilogues would have saved for this backward: the pre-GELU x at
a leading dimension divisible by 8 (x itself where it already is), or the ReLU bitmask
that RELU_AUX writes, made here by a RELU_AUX GEMM of x with an identity (so that the bit
layout is cuBLASLt's own), and a 32 MiB workspace. The timed call allocates dx, dw, db and
the plan's temporaries and runs the plan. Where cuBLASLt's heuristic has no algorithm for
a GEMM's combination (epilogue, dtype, shapes, leading dimensions, alignment), the item is
`unsupported` with that combination: never a fallback to a plain GEMM. What ran (each
GEMM's epilogue, algorithm id, tile, stages, split-K and reduction scheme, where the
derivative was applied) is reported as facts (suite/facts.py: `impl_facts_json`).

Not claimed deterministic: the heuristic may choose split-K; the determinism check
reports what it finds, and the facts say which algorithm ran.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Optional

import torch

from bwd_suite.kernels.cuda_build import cuda_library, cuda_only, load_extension
from bwd_suite.suite import facts
from bwd_suite.suite.registry import Unsupported, implementation

CSRC = Path(__file__).resolve().parent / "csrc"
SOURCES = [CSRC / name for name in (
    "linear_bwd_binding.cpp", "linear_bwd_plan.cpp", "linear_bwd_launch.cpp",
    "linear_bwd_dact.cu", "linear_bwd_act.cu")]
WORKSPACE_BYTES = 32 << 20  # cuBLASLt's workspace (PyTorch's default on Hopper)
ACTS = {"none": 0, "relu": 1, "gelu": 2, "gelu_tanh": 3, "silu": 4}
_workspaces: dict = {}


def extension():
    includes, ldflags = cuda_library("cublasLt.h", "cublasLt")
    return load_extension("bwd_suite_linear", SOURCES, includes, ldflags)


def act_code(activation: str, approximate: str) -> int:
    return ACTS["gelu_tanh" if activation == "gelu" and approximate == "tanh" else activation]


def unsupported_reason(activation: str, approximate: str, act_at: str) -> Optional[str]:
    """The plan's refusals (linear_bwd_plan.cpp), known from the parameters alone."""
    if act_at != "input":
        return None
    if activation == "gelu" and approximate == "none":
        return ("cuBLASLt's DGELU epilogue is the tanh form of GELU: it has no derivative of "
                "the erf GELU (approximate = \"none\") to fuse into the dgrad GEMM")
    if activation == "silu":
        return "cuBLASLt has no SiLU derivative epilogue to fuse into the dgrad GEMM"
    return None


def _supports(p: Mapping) -> Optional[str]:
    return unsupported_reason(p["activation"], p["approximate"], p["act_at"])


def _col_major(t: torch.Tensor) -> bool:
    """Stored as the transpose of a contiguous tensor (what the op's *_t parameters make)."""
    return t.dim() == 2 and t.size(0) > 1 and t.stride(0) == 1


def problem(x, w, dy, bias, z, a, activation, approximate, act_at) -> list:
    """The plan's problem: m n k act act_at bias recompute x_t w_t dy_t elem_bytes."""
    recompute = activation != "none" and z is None and a is None
    return [x.shape[0], w.shape[0], x.shape[1], act_code(activation, approximate),
            int(act_at == "input"), int(bias is not None), int(recompute), int(_col_major(x)),
            int(_col_major(w)), int(_col_major(dy)), x.element_size()]


def _workspace(device: torch.device) -> torch.Tensor:
    if device not in _workspaces:
        _workspaces[device] = torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device=device)
    return _workspaces[device]


def _result(res: Mapping, what: str) -> None:
    """Report the facts of a status dict; raise on a refusal or a failure."""
    facts.report(**{str(k): v for k, v in res["facts"].items()})
    if res["status"] == "unsupported":
        raise Unsupported(res["message"])
    if res["status"] != "ok":
        raise RuntimeError(f"{what}: {res['message']}")


def _colmajor_buffer(rows: int, cols: int, ld: int, **kw) -> torch.Tensor:
    """(rows x cols) column-major at `ld`, as a (cols, ld) tensor's first rows columns."""
    return torch.zeros(cols, ld, **kw)


def _aux(plan: Mapping, x: torch.Tensor, prob: list, ext) -> Optional[torch.Tensor]:
    """What the forward's *_AUX epilogue would have saved: x padded to the aux ld (GELU) or
    its ReLU bitmask; None where x itself serves."""
    aux = plan["aux"]
    if not aux["needed"] or aux["copy_of_x"]:
        return None
    rows, cols, ld = aux["rows"], aux["cols"], aux["ld"]
    # x's memory as the column-major (rows x cols) matrix of the dgrad output's orientation
    src = x.t() if _col_major(x) else x
    if not aux["bitmask"]:
        buf = _colmajor_buffer(rows, cols, ld, dtype=x.dtype, device=x.device)
        buf[:, :rows].copy_(src)
        return buf
    mask = torch.zeros(cols * ld // 8, dtype=torch.uint8, device=x.device)
    ident = torch.eye(aux["identity"], dtype=x.dtype, device=x.device)
    scratch = torch.empty(aux["scratch_rows"] * aux["scratch_cols"], dtype=x.dtype,
                          device=x.device)
    _result(ext.relu_mask(prob, {"x": x, "ident": ident, "scratch": scratch, "aux": mask},
                          _workspace(x.device)), "relu_mask")
    return mask


def prepare(*, x, w, dy, bias, z, a, activation, approximate, act_at):
    ext = extension()
    prob = problem(x, w, dy, bias, z, a, activation, approximate, act_at)
    plan = ext.plan(prob)
    if plan.get("error"):
        raise RuntimeError(f"linear plan: {plan['error']}")
    if plan["unsupported"]:
        raise Unsupported(plan["unsupported"])
    aux = _aux(plan, x, prob, ext)
    facts.report(derivative=plan["derivative"], steps=", ".join(plan["steps"]),
                 aux="none" if not plan["aux"]["needed"] else "relu bitmask"
                 if plan["aux"]["bitmask"] else "x" if aux is None else "x padded")
    return {"ext": ext, "problem": prob, "plan": plan, "aux": aux,
            "workspace": _workspace(x.device)}


def _temporary(m: Mapping, like: torch.Tensor) -> torch.Tensor:
    """A plan's temporary: (rows, cols) stored as it says."""
    if m["col_major"]:
        return torch.empty(m["cols"], m["rows"], dtype=like.dtype, device=like.device).t()
    return torch.empty(m["rows"], m["cols"], dtype=like.dtype, device=like.device)


@implementation("linear", "cublaslt", kind="ours", prepare=prepare, supports=_supports,
                deterministic=False, build=extension, **cuda_only())
def cublaslt(*, x, w, dy, bias, z, a, activation, approximate, act_at, saved):
    """cuBLASLt GEMMs with DGELU/DRELU and BGRAD epilogues; dZ after the GEMM as our kernel"""
    out = {"dx": torch.empty_like(x), "dw": torch.empty_like(w)}
    tensors = {"x": x, "w": w, "dy": dy, **out}
    if bias is not None:
        out["db"] = tensors["db"] = torch.empty_like(bias)
        tensors["bias"] = bias
    for name, t in (("z", z), ("a", a), ("aux", saved["aux"])):
        if t is not None:
            tensors[name] = t
    for m in saved["plan"]["temporaries"]:
        tensors[m["tensor"]] = _temporary(m, x)
    _result(saved["ext"].run(saved["problem"], tensors, saved["workspace"]), "linear_bwd")
    return out
