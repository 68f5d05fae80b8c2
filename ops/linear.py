"""Op contract of the linear layer backward with an activation beside it (seeds 001, 003;
issue 42): the two GEMMs of a forward matmul's backward, the activation's derivative and
the bias gradient.

Where the activation sits (`act_at`) decides what a fused GEMM can take on: cuBLASLt's
D* epilogues multiply a GEMM's OUTPUT by act'(aux), and BGRADA/BGRADB sum a GEMM INPUT
over k. With the activation after the GEMM (`output`: Y = act(x wᵀ + b)) the derivative
dZ = dY ⊙ act'(Z) applies to both GEMMs' input and rides no epilogue; with it on the
layer's input (`input`: Y = act(x) wᵀ + b, an MLP's second linear, the path TransformerEngine
and Apex fuse) dx = (dY w) ⊙ act'(x) is the dgrad GEMM's output (DGELU / DRELU), and db =
Σ dY rides the wgrad GEMM (BGRAD) in both positions. golden/linear.py has the formulas.

Interface (`fn(**inputs, **attrs, out=...)`):

    inputs  x     (M, K)  case dtype; with act_at = "input" the activation's input
            w     (N, K)  case dtype (PyTorch's weight: out x in)
            dy    (M, N)  case dtype, the gradient of Y
            bias  (N,)    case dtype with bias, else None (only a recomputed Z reads it)
            z     (M, N)  the saved pre-activation x wᵀ + b (the float64 product of the
                          given x, w, b rounded once to the dtype), layout of dy; only with
                          an activation after the GEMM and recompute = false, else None
            a     (M, K)  the saved act(x) (float64, rounded once), layout of x; only with
                          an activation on the input and recompute = false, else None
    attrs   activation   "none", "relu", "gelu", "silu"
            approximate  "none" or "tanh" (gelu's)
            act_at       "output" or "input"
    outputs dx like x, dw like w (memory layouts included), db (N,) with bias: each a
            reduction (dx over N terms, dw and db over M).

Storage (`x_t`, `w_t`, `dy_t`): a tensor is row-major, or the transpose of a contiguous
one (column-major); z follows dy, a follows x, and each gradient its tensor.

Input values: x N(0, 1), w N(0, 1/K) (so Z is about N(0, 1 + 1/4): the activations' curved
part and both tails), bias N(0, 1/4), dy N(0, 1). With relu after the GEMM, dy is 0 where
|Z| < RELU_GAP: there the branch depends on how the forward rounded Z, which differs
between correct implementations that recompute it (PyTorch's autograd does, and so does
any recompute = true), and a flipped branch moves a whole row of dx (about 0.08% of dy).

The shapes may also be given by tensor (`w_shape`, `dy_shape`, `bias_shape`), as a case
copied from a model would: they must agree with m, n, k (bad input otherwise).
"""

from __future__ import annotations

from typing import Mapping

import torch

from bwd_suite.golden import linear as golden
from bwd_suite.ops.linear_diagnosis import SPEC as DIAGNOSIS
from bwd_suite.suite import inputs as mk
from bwd_suite.suite.opspec import CaseInputs, OpSpec, OutputSpec, TolClass
from bwd_suite.suite.params import IntList, IntRange, Param, ParamSet
from bwd_suite.suite.registry import register_op

# the tensor shapes are never drawn by the fuzzer (always [], taken from m, n, k): a
# drawn shape that disagrees is bad input, not a case
GIVEN_SHAPE = IntList(IntRange(0, 0), max_len=0)
RELU_GAP = 1e-3  # |Z| below this gets dy = 0 with relu after the GEMM (module docstring)
W_SCALE_POWER = -0.5  # w ~ N(0, K^-1): unit-variance Z whatever K
BIAS_SCALE = 0.5

PARAMS = ParamSet((
    Param("m", "int", 64, "M, rows of x and dy (tokens of a batch)", minimum=1,
          id_token=lambda v: f"M{v}", domain=IntRange(1, 1 << 14, axis=True)),
    Param("n", "int", 64, "N, the layer's outputs (rows of w, columns of dy)", minimum=1,
          id_token=lambda v: f"N{v}", domain=IntRange(1, 1 << 14, axis=True)),
    Param("k", "int", 64, "K, the layer's inputs (columns of x and w)", minimum=1,
          id_token=lambda v: f"K{v}", domain=IntRange(1, 1 << 14, axis=True)),
    Param("dtype", "str", "bfloat16", "dtype of every tensor and gradient",
          choices=("float32", "float16", "bfloat16"), id_token=lambda v: mk.DTYPE_SHORT[v]),
    Param("bias", "bool", True, "the layer has a bias (output db)",
          id_token=lambda v: "bias" if v else "nobias"),
    Param("activation", "str", "none", "the activation beside the GEMM",
          choices=golden.ACTIVATIONS, id_token=lambda v: "" if v == "none" else v),
    Param("approximate", "str", "none", "gelu's form: none (erf) or tanh",
          choices=golden.APPROXIMATES, id_token=lambda v: "" if v == "none" else v),
    Param("act_at", "str", "output", "where the activation sits: output (act(x wᵀ + b)) "
          "or input (act(x) wᵀ + b, an MLP's second linear)", choices=golden.POSITIONS,
          id_token=lambda v: "" if v == "output" else "actin"),
    Param("recompute", "bool", False, "the backward recomputes Z (output) or act(x) "
          "(input) instead of reading what the forward saved",
          id_token=lambda v: "recomp" if v else ""),
    Param("x_t", "bool", False, "x stored transposed (column-major)",
          id_token=lambda v: "xT" if v else ""),
    Param("w_t", "bool", False, "w stored transposed (column-major)",
          id_token=lambda v: "wT" if v else ""),
    Param("dy_t", "bool", False, "dy (and z) stored transposed (column-major)",
          id_token=lambda v: "dyT" if v else ""),
    Param("w_shape", "int_list", [], "the shape of w, [N, K], where a case gives it "
          "(must agree with n and k)", minimum=0, id_token=lambda v: "", domain=GIVEN_SHAPE),
    Param("dy_shape", "int_list", [], "the shape of dy, [M, N], where a case gives it "
          "(must agree with m and n)", minimum=0, id_token=lambda v: "", domain=GIVEN_SHAPE),
    Param("bias_shape", "int_list", [], "the shape of the bias, [N], where a case gives it",
          minimum=0, id_token=lambda v: "", domain=GIVEN_SHAPE),
), fuzz_bounds=lambda p, device: fuzz_bounds(p, device))

# outputs of fewer elements than this, summed from a 16-bit intermediate, are not fuzzed
FEW_ELEMENTS = 16


def fuzz_bounds(p: Mapping, device: str):
    """Valid cases the fuzzer does not draw, with the parameter to blame: 16-bit cases
    where an output of few elements is a sum over an intermediate every implementation
    rounds to the dtype (dZ after the GEMM, which both GEMMs read in the dtype; a
    recomputed act(x) on the input, for dw). A sum that cancels leaves such an output far
    below its terms, and the terms' 16-bit rounding is then most of it: fuzzed on the CPU,
    db of M5-N1-K261-bf16-silu was 0.64 of its max|golden| off in torch_ref and
    torch_unfused alike (the sum of 5 terms of about 1 cancelled to 2.5e-4), dx of
    M1-N3323-K1-fp16-silu 0.0099 (a ceiling of 0.01). With many elements one of them
    keeps the scale. Case files may still hold such cases."""
    if p["dtype"] == "float32" or p["activation"] == "none":
        return None
    M, N, K = p["m"], p["n"], p["k"]
    if p["act_at"] == "output":
        sizes = [("dx", M * K, "m" if M <= K else "k"), ("dw", N * K, "n" if N <= K else "k")]
        if p["bias"]:
            sizes.append(("db", N, "n"))
    elif p["recompute"]:
        sizes = [("dw", N * K, "n" if N <= K else "k")]
    else:
        return None
    for out, n, blame in sizes:
        if n < FEW_ELEMENTS:
            return blame, (f"{out} of {n} elements sums a 16-bit intermediate: a cancelling "
                           "sum leaves it below its terms' rounding")
    return None



def _shapes_disagree(p: Mapping):
    """A tensor shape a case gives that contradicts m, n, k (or another given shape)."""
    M, N, K = p["m"], p["n"], p["k"]
    w, dy, b = list(p["w_shape"]), list(p["dy_shape"]), list(p["bias_shape"])
    if w and len(w) != 2:
        return "w_shape", f"{w} is not [N, K]"
    if dy and len(dy) != 2:
        return "dy_shape", f"{dy} is not [M, N]"
    if w and w[1] != K:
        return "w_shape", f"K of x and w disagree: w {w} has K = {w[1]}, x has K = {K} (k)"
    n_w = w[0] if w else N
    if dy and dy[1] != n_w:
        return "dy_shape", (f"N of w and dy disagree: dy {dy} has N = {dy[1]}, w has N = "
                            f"{n_w} ({'w_shape' if w else 'n'})")
    if w and w[0] != N:
        return "w_shape", f"N of w and dy disagree: w {w} has N = {w[0]}, dy has N = {N} (n)"
    if dy and dy[0] != M:
        return "dy_shape", f"M of x and dy disagree: dy {dy} has M = {dy[0]}, x has M = {M} (m)"
    if b and not p["bias"]:
        return "bias_shape", "a bias shape with bias = false"
    if b and b != [n_w]:
        return "bias_shape", f"a bias of shape {b} for N = {n_w} outputs (it is [N])"
    return None


def check_case(p: Mapping):
    """Shapes that disagree, and keys that would do nothing."""
    found = _shapes_disagree(p)
    if found:
        return found
    if p["activation"] != "gelu":
        found = PARAMS.no_effect(p, "approximate", "without activation = \"gelu\"")
        if found:
            return found
    if p["activation"] == "none":
        return PARAMS.no_effect(p, "act_at", "without an activation") or \
            PARAMS.no_effect(p, "recompute", "without an activation")
    return None


# ---------------------------------------------------------------- input factory

def _order(transposed: bool):
    return (1, 0) if transposed else None


def _rounded_like(like: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """`value` rounded once to like's dtype, in like's memory layout."""
    return mk.empty_like_layout(like).copy_(value)


def make_inputs(p: Mapping, seed: int, device: torch.device) -> CaseInputs:
    gen = mk.generator(seed)
    M, N, K = p["m"], p["n"], p["k"]
    dt = mk.DTYPES[p["dtype"]]
    x = mk.randn((M, K), dt, gen, device, order=_order(p["x_t"]))
    w = mk.randn((N, K), dt, gen, device, scale=K ** W_SCALE_POWER, order=_order(p["w_t"]))
    dy = mk.randn((M, N), dt, gen, device, order=_order(p["dy_t"]))
    bias = mk.randn((N,), dt, gen, device, scale=BIAS_SCALE) if p["bias"] else None
    act, at = p["activation"], p["act_at"]
    z = a = None
    if act != "none" and at == "output":
        z64 = golden.preactivation(x.double(), w.double(),
                                   bias.double() if bias is not None else None)
        if act == "relu":  # the branch is the forward's rounding's near 0 (docstring)
            dy.masked_fill_(z64.abs() < RELU_GAP, 0)
        if not p["recompute"]:
            z = _rounded_like(dy, z64)
        del z64
    elif act != "none" and not p["recompute"]:
        a = _rounded_like(x, golden.act(x.double(), act, p["approximate"]))
    return CaseInputs(tensors={"x": x, "w": w, "dy": dy, "bias": bias, "z": z, "a": a},
                      attrs={"activation": act, "approximate": p["approximate"],
                             "act_at": at})


# ---------------------------------------------------------------- outputs

def outputs(p: Mapping):
    """Each a sum: dx over N terms, dw and db over M (their fp32 summation floors grow
    with those lengths: suite/tolerances.py)."""
    found = [OutputSpec("dx", TolClass.REDUCTION, terms=p["n"]),
             OutputSpec("dw", TolClass.REDUCTION, terms=p["m"])]
    if p["bias"]:
        found.append(OutputSpec("db", TolClass.REDUCTION, terms=p["m"]))
    return found


def empty_outputs(inputs: CaseInputs, p: Mapping) -> dict:
    t = inputs.tensors
    out = {"dx": mk.empty_like_layout(t["x"]), "dw": mk.empty_like_layout(t["w"])}
    if p["bias"]:
        out["db"] = torch.empty(p["n"], dtype=t["x"].dtype, device=t["x"].device)
    return out


def run_golden(x, w, dy, bias, z, a, activation, approximate, act_at):
    return golden.backward(x, w, dy, bias=bias, z=z, a=a, activation=activation,
                           approximate=approximate, act_at=act_at, has_bias=bias is not None)


# ---------------------------------------------------------------- roofline

# flops of one element of act'(z) times its upstream gradient, counted from the formulas
# of golden/linear.py (a tanh, erf, exp or sigmoid as one): relu the select (1); gelu erf
# Φ (3), φ (4), z φ and the sum (2), the product (1); gelu tanh u (4), tanh (1), (1 + t)/2
# (2), 1 - t² (2), 1 + 3a z² (3), the products with z and √(2/π) and the halves (4), the
# sum (1), the product (1); silu s (1), 1 - s, z (1 - s), 1 + (3), s (...) (1), product (1)
DACT_FLOPS = {"none": 0, "relu": 1, "gelu": 10, "gelu_tanh": 18, "silu": 6}
# flops of one element of act(x) (a recomputed A): relu 1; gelu erf 5; tanh 9; silu 2
ACT_FLOPS = {"none": 0, "relu": 1, "gelu": 5, "gelu_tanh": 9, "silu": 2}


def _act_key(p: Mapping) -> str:
    a = p["activation"]
    return "gelu_tanh" if a == "gelu" and p["approximate"] == "tanh" else a


def _es(p: Mapping) -> int:
    return torch.finfo(mk.DTYPES[p["dtype"]]).bits // 8


def flops(p: Mapping) -> int:
    """The two GEMMs (dgrad 2MNK, wgrad 2MNK); the derivative applied to its elements
    (M N after the GEMM, M K before it; DACT_FLOPS each); the bias gradient's column sum
    (M N adds); a recomputed Z (2MNK and M N bias adds) or A (ACT_FLOPS each of M K)."""
    M, N, K = p["m"], p["n"], p["k"]
    key, output = _act_key(p), p["act_at"] == "output"
    total = 4 * M * N * K + DACT_FLOPS[key] * (M * N if output else M * K)
    if p["bias"]:
        total += M * N
    if p["recompute"] and key != "none":
        total += 2 * M * N * K + (M * N if p["bias"] else 0) if output \
            else ACT_FLOPS[key] * M * K
    return total


def compulsory_bytes(p: Mapping) -> int:
    """x, w, dy read and dx, dw written once, db written with bias; the saved z (M N) or a
    (M K) read where saved; the bias read where Z is recomputed from it."""
    M, N, K = p["m"], p["n"], p["k"]
    es, act = _es(p), p["activation"] != "none"
    n = es * (2 * M * K + 2 * N * K + M * N)
    if p["bias"]:
        n += es * N
    if act and not p["recompute"]:
        n += es * (M * N if p["act_at"] == "output" else M * K)
    if act and p["recompute"] and p["act_at"] == "output" and p["bias"]:
        n += es * N
    return n


def epilogue_saved_bytes(p: Mapping) -> int:
    """Global-memory traffic an unfused backward has that the GEMM epilogues remove: with
    bias, a second read of dY (or dZ) for its column sum (M N, BGRAD); with the activation
    on the input, the dgrad product dY w written and read back before the derivative
    (2 M K, DGELU / DRELU). After the GEMM the derivative is a pass of its own either way
    (0). (A relu bitmask's smaller reads of the saved mask are not counted.)"""
    M, N, K = p["m"], p["n"], p["k"]
    n = M * N if p["bias"] else 0
    if p["act_at"] == "input" and p["activation"] != "none":
        n += 2 * M * K
    return _es(p) * n


def memory_bounds(p: Mapping) -> dict:
    """Temporary memory of the backward, in bytes: `unfused` holds dZ (M N: after the
    GEMM) or the dgrad product dY w (M K: on the input) beside the outputs; `fused`, with
    the derivative in the dgrad epilogue, holds dZ after the GEMM (no epilogue takes it)
    and nothing on the input. A recomputed Z (M N) or A (M K) adds to both."""
    M, N, K = p["m"], p["n"], p["k"]
    es, act, output = _es(p), p["activation"] != "none", p["act_at"] == "output"
    unfused = fused = 0
    if act:
        unfused = M * N if output else M * K
        fused = M * N if output else 0
        if p["recompute"]:
            extra = M * N if output else M * K
            unfused, fused = unfused + extra, fused + extra
    return {"unfused": es * unfused, "fused": es * fused}


def case_stats(p: Mapping, inputs: CaseInputs, outputs: Mapping, gold: Mapping) -> dict:
    """The bytes the epilogues save (epilogue_saved_bytes) and that share of the
    compulsory traffic: the most a fused backward can gain on a memory-bound case."""
    saved = epilogue_saved_bytes(p)
    return {"epilogue_saved_bytes": saved,
            "epilogue_saved_frac": saved / compulsory_bytes(p)}


def golden_workspace(p: Mapping) -> int:
    """The golden's float64 temporaries: Z and dZ (M N each) after the GEMM; the dgrad
    product, act'(x) and A (M K each) on the input."""
    M, N, K = p["m"], p["n"], p["k"]
    return 8 * (2 * M * N if p["act_at"] == "output" else 3 * M * K)


SPEC = register_op(OpSpec(
    name="linear",
    doc="linear layer backward with an activation after the GEMM or on its input, saved or "
        "recomputed, optional bias: dx, dw, db",
    params=PARAMS,
    check_case=check_case,
    make_inputs=make_inputs,
    golden=run_golden,
    golden_workspace=golden_workspace,
    outputs=outputs,
    empty_outputs=empty_outputs,
    bytes=compulsory_bytes,
    flops=flops,
    memory_bounds=memory_bounds,
    case_stats=case_stats,
    diagnosis=DIAGNOSIS,
))
