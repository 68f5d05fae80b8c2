"""Op contract of AdamW optimizer steps over a parameter list, updated in place (PyTorch's
semantics; issue 26). The float64 truth is `golden.adamw.adamw`; docs/ops/adamw.md.

Inputs (lists, one tensor per parameter; mutated ones updated in place): params in the
case dtype (mutated), grads in the case dtype or fp32, times loss_scale; master (fp32
master weights, mutated) or None; exp_avg, exp_avg_sq (fp32 moments, mutated);
max_exp_avg_sq (fp32, mutated) with amsgrad, else None. Attributes: lr, beta1, beta2, eps,
weight_decay, step (the step count of the first update), steps, maximize, amsgrad,
scaler (GradScaler around the step, or a plain step), loss_scale, max_norm (0: no
clipping). Output: found_inf (1,) fp32, 1 when a gradient held an inf or NaN and every
tensor was left as it was (always 0 without a scaler).

Input values: params (or masters) N(0, 1); gradients N(0, 1) times loss_scale, rounded to
their dtype (zeros with grads = "zero"; the middle element of the last tensor inf or NaN
with "inf_one" / "nan_one"). At step 1 the moments are zeros, PyTorch's initial state; at
a later step count they are a state such steps leave: exp_avg 0.1 N(0, 1), exp_avg_sq
N(0, 1)^2, max_exp_avg_sq exp_avg_sq (1 + |N(0, 1)|).
"""

from __future__ import annotations

import math
from typing import Mapping

import torch

from bwd_suite.golden import adamw as golden
from bwd_suite.ops import adamw_stats
from bwd_suite.ops.adamw_diagnosis import SPEC as DIAGNOSIS
from bwd_suite.ops.adamw_shapes import PRESETS, shapes
from bwd_suite.suite import inputs as mk
from bwd_suite.suite.opspec import CaseInputs, OpSpec, OutputSpec, TolClass
from bwd_suite.suite.params import FloatRange, IntList, IntRange, Param, ParamSet
from bwd_suite.suite.registry import register_op

GRADS = ("randn", "zero", "inf_one", "nan_one")


def _tok(name: str, default):
    """`name` + value, left out at the default."""
    return lambda v: "" if v == default else f"{name}{v!r}" if isinstance(v, float) \
        else f"{name}{v}"


PARAMS = ParamSet((
    # the fuzzer varies the tensor count (the size axis, up to 512: each tensor costs host
    # time in the golden and the yardstick; many-tensor lists are the perf cases') and the
    # tensors' sizes (up to 40 elements on a CPU, 65536, past several chunks, on a GPU)
    Param("sizes", "int_list", [1000], "elements of each parameter tensor (1-D), the list "
          "(without a preset)", minimum=1, id_token=lambda v: "n" + ".".join(map(str, v)),
          domain=IntList(IntRange(1, 1 << 16, caps={"small": 40}), max_len=3)),
    Param("repeat", "int", 1, "the list of sizes repeated this many times (many tensors)",
          minimum=1, id_token=_tok("r", 1), domain=IntRange(1, 512, axis=True, caps={"small": 64})),
    Param("grad_sizes", "int_list", [], "elements of each gradient, when a case states "
          "them: they must equal sizes (empty: those of sizes)", minimum=1,
          id_token=lambda v: "", domain=IntList(IntRange(1, 1), max_len=0)),
    Param("preset", "str", "", "a named parameter list instead of sizes",
          choices=("",) + tuple(PRESETS), id_token=lambda v: v),
    Param("dtype", "str", "float32", "dtype of the parameters",
          choices=("float32", "float16", "bfloat16"), id_token=lambda v: mk.DTYPE_SHORT[v]),
    Param("grad_dtype", "str", "param", "dtype of the gradients: the parameters' or fp32",
          choices=("param", "float32"), id_token=lambda v: "" if v == "param" else "g32"),
    Param("master", "bool", False, "fp32 master weights (the parameter a cast of them)",
          id_token=lambda v: "master" if v else ""),
    Param("grads", "str", "randn", "gradient values: N(0, 1), zeros, or one inf or NaN in "
          "the last tensor", choices=GRADS, id_token=lambda v: "" if v == "randn" else v),
    Param("lr", "float", 1e-3, "learning rate", minimum=0.0, id_token=_tok("lr", 1e-3),
          domain=FloatRange(0.0, 1.0, special=(0.0, 1e-3, 0.1))),
    Param("beta1", "float", 0.9, "first-moment decay, in [0, 1)", minimum=0.0,
          id_token=_tok("b1-", 0.9),
          domain=FloatRange(0.0, 1.0, special=(0.0, 0.9, 0.5), high_open=True)),
    Param("beta2", "float", 0.999, "second-moment decay, in [0, 1)", minimum=0.0,
          id_token=_tok("b2-", 0.999),
          domain=FloatRange(0.0, 1.0, special=(0.0, 0.999, 0.9), high_open=True)),
    # eps > 0 in the fuzzer: eps = 0 with a zero gradient at step 1 is 0 / 0
    Param("eps", "float", 1e-8, "added to the denominator", minimum=0.0,
          id_token=_tok("eps", 1e-8), domain=FloatRange(1e-12, 1e-3, special=(1e-8, 1e-3))),
    Param("weight_decay", "float", 1e-2, "decoupled weight decay", minimum=0.0,
          id_token=_tok("wd", 1e-2), domain=FloatRange(0.0, 1.0, special=(0.0, 1e-2, 0.1))),
    Param("step", "int", 1, "step count of the first update (bias correction)", minimum=1,
          id_token=_tok("t", 1), domain=IntRange(1, 10000)),
    Param("steps", "int", 1, "consecutive steps in one call (same gradients)", minimum=1,
          id_token=_tok("x", 1), domain=IntRange(1, 4)),
    Param("maximize", "bool", False, "ascend instead of descend",
          id_token=lambda v: "max" if v else ""),
    Param("amsgrad", "bool", False, "AMSGrad: the denominator from the running max of v",
          id_token=lambda v: "ams" if v else ""),
    Param("scaler", "bool", True, "the step runs under GradScaler: gradients unscaled by "
          "loss_scale, an inf or NaN skips it (found_inf); false: a plain optimizer.step() "
          "on finite gradients", id_token=lambda v: "" if v else "plain"),
    Param("loss_scale", "float", 1.0, "S: gradients arrive times S and are unscaled",
          minimum=0.0, id_token=_tok("S", 1.0),
          domain=FloatRange(1.0, 65536.0, special=(1.0, 1024.0, 65536.0))),
    Param("max_norm", "float", 0.0, "global-norm clipping of the whole list (0: none)",
          minimum=0.0, id_token=_tok("clip", 0.0),
          domain=FloatRange(0.0, 1e6, special=(0.0, 1.0, 1e6))),
), fuzz_bounds=lambda p, device: fuzz_bounds(p, device),
   rewrites=lambda p: rewrites(p))

# a case written out as one explicit list is not offered beyond this many tensors: each
# dropped tensor is a shrink variant, and the id lists every size
REWRITE_MAX_TENSORS = 64


# Below this (and above 0) PyTorch's AdamW, the yardstick, is wrong by itself: it forms
# exp_avg as lerp(grad, 1 - beta1) with the weight rounded to fp32, so 1 - weight, the
# share of the old moment, is off by up to 2^-25, relative 2^-25 / beta1 (1.2e-4 at
# beta1 = 1.7e-4 with zero gradients; cases/adamw/findings.toml)
SMALL_BETA1 = 1e-3


def fuzz_bounds(p: Mapping, device: str):
    """Valid cases the fuzzer does not draw, with the parameter to blame: GPT-2 large's
    774M parameters (beyond every fuzz size), 16-bit gradients whose loss scale makes
    N(0, 1) values overflow (every such case only skips), and a beta1 in (0, SMALL_BETA1)
    where the yardstick is wrong by itself."""
    if p["preset"] == "gpt2_large":
        return "preset", "774M parameters, beyond every fuzz size"
    if 0 < p["beta1"] < SMALL_BETA1:
        return "beta1", (f"in (0, {SMALL_BETA1:g}) PyTorch's AdamW (the yardstick) rounds the "
                         "lerp weight 1 - beta1 to fp32: its exp_avg is off by up to "
                         "2^-25 / beta1 (cases/adamw/findings.toml)")
    gdt = mk.DTYPES["float32" if p["grad_dtype"] == "float32" else p["dtype"]]
    if 6 * p["loss_scale"] > torch.finfo(gdt).max:
        return "loss_scale", "N(0, 1) gradients times S overflow their dtype"
    return None


def rewrites(p: Mapping) -> list:
    """The same case spelled with 1-D `sizes` (for the shrinker, ParamSet.rewrites):
    make_inputs draws each tensor's values in turn, and how many only by its element
    count, so a preset's shapes flattened give the same numbers, and a repeated list
    written out with repeat = 1 too. One-parameter moves can then drop or shorten single
    tensors, which a preset or a repeat does not let them."""
    if not p["preset"] and p["repeat"] == 1:
        return []
    one = [math.prod(s) for s in PRESETS[p["preset"]]] if p["preset"] else list(p["sizes"])
    out = []
    if p["preset"]:
        out.append({"preset": "", "sizes": one, "grad_sizes": one if p["grad_sizes"] else []})
    full = one * p["repeat"]
    if p["repeat"] > 1 and len(full) <= REWRITE_MAX_TENSORS:
        out.append({"preset": "", "sizes": full, "repeat": 1,
                    "grad_sizes": full if p["grad_sizes"] else []})
    return [dict(p, **r) for r in out]


def check_case(p: Mapping):
    for k in ("beta1", "beta2"):
        if not p[k] < 1:
            return k, f"{p[k]!r} must be in [0, 1)"
    if p["loss_scale"] <= 0:
        return "loss_scale", f"{p['loss_scale']!r} must be positive"
    if not p["scaler"] and p["loss_scale"] != 1.0:
        return "loss_scale", f"{p['loss_scale']!r} needs scaler = true (without a GradScaler " \
                             "nothing unscales)"
    if not p["scaler"] and p["grads"] in ("inf_one", "nan_one"):
        return "grads", (f"{p['grads']!r} needs scaler = true: without a GradScaler nothing "
                         "skips the step, and the parameters turn NaN")
    if p["preset"] and p["sizes"] != PARAMS.by_name["sizes"].default:
        return "sizes", f"has no effect with preset = {p['preset']!r}"
    if not p["preset"] and not p["sizes"]:
        return "sizes", "the parameter list is empty"
    if p["grad_sizes"] and list(p["grad_sizes"]) != list(p["sizes"]):
        return "grad_sizes", (f"{list(p['grad_sizes'])} disagrees with sizes "
                              f"{list(p['sizes'])}: one gradient per parameter, of its size")
    if p["master"] and p["dtype"] == "float32":
        return "master", "fp32 master weights of fp32 parameters are the parameters"
    return None


# ---------------------------------------------------------------- input factory

def make_inputs(p: Mapping, seed: int, device: torch.device) -> CaseInputs:
    gen = mk.generator(seed)
    pdt = mk.DTYPES[p["dtype"]]
    gdt = torch.float32 if p["grad_dtype"] == "float32" else pdt
    f32 = torch.float32
    params, grads, master, m, v, vmax = [], [], [], [], [], []
    for shape in shapes(p):
        w = mk.randn(shape, f32, gen, device)
        if p["master"]:
            master.append(w)
        params.append(w.to(pdt))
        g = mk.randn(shape, f32, gen, device) * p["loss_scale"]
        grads.append((torch.zeros_like(g) if p["grads"] == "zero" else g).to(gdt))
        if p["step"] == 1:  # PyTorch's initial state
            m.append(torch.zeros(shape, dtype=f32, device=device))
            v.append(torch.zeros(shape, dtype=f32, device=device))
        else:
            m.append(mk.randn(shape, f32, gen, device, scale=0.1))
            v.append(mk.randn(shape, f32, gen, device).square())
        vmax.append(v[-1] * (1 + mk.randn(shape, f32, gen, device).abs()))
    if p["grads"] in ("inf_one", "nan_one"):
        last = grads[-1].view(-1)
        last[last.numel() // 2] = float("inf") if p["grads"] == "inf_one" else float("nan")
    attrs = {k: p[k] for k in ("lr", "beta1", "beta2", "eps", "weight_decay", "step",
                               "steps", "maximize", "amsgrad", "scaler", "loss_scale",
                               "max_norm")}
    return CaseInputs(
        tensors={"params": params, "grads": grads,
                 "master": master if p["master"] else None,
                 "exp_avg": m, "exp_avg_sq": v,
                 "max_exp_avg_sq": vmax if p["amsgrad"] else None},
        attrs=attrs,
    )


# ---------------------------------------------------------------- outputs

def outputs(p: Mapping):
    names = ["params", "exp_avg", "exp_avg_sq"]
    names += ["master"] if p["master"] else []
    names += ["max_exp_avg_sq"] if p["amsgrad"] else []
    # each element its own short formula, rounded once (a norm over the list only scales)
    return [OutputSpec(n, TolClass.ELEMENTWISE) for n in names + ["found_inf"]]


def empty_outputs(inputs: CaseInputs, p: Mapping) -> dict:
    dev = inputs.tensors["params"][0].device
    return {"found_inf": torch.empty(1, dtype=torch.float32, device=dev)}


def run_golden(params, grads, master, exp_avg, exp_avg_sq, max_exp_avg_sq, **attrs):
    return golden.adamw(params, grads, master, exp_avg, exp_avg_sq, max_exp_avg_sq, **attrs)


# ---------------------------------------------------------------- roofline

def numel(p: Mapping) -> int:
    n = 0
    for s in shapes(p):
        k = 1
        for d in s:
            k *= d
        n += k
    return n


def compulsory_bytes(p: Mapping) -> int:
    """Per element: the gradient read; the fp32 moments read and written (16, 24 with
    amsgrad); the parameter read and written, or with master weights the master read and
    written (8) and the parameter written. Once per call whatever `steps` is (the state
    may stay on chip between steps)."""
    es = torch.finfo(mk.DTYPES[p["dtype"]]).bits // 8
    gs = 4 if p["grad_dtype"] == "float32" else es
    per = gs + (24 if p["amsgrad"] else 16) + (8 + es if p["master"] else 2 * es)
    return numel(p) * per + 4


def flops(p: Mapping) -> int:
    """Per element and step about 16 (unscale, decay, two moments, the denominator and the
    update), plus 2 for the norm with clipping."""
    return numel(p) * (16 * p["steps"] + (2 if p["max_norm"] else 0))


SPEC = register_op(OpSpec(
    name="adamw",
    doc="AdamW steps over a parameter list in place (unscale, skip on inf, clip, update)",
    params=PARAMS,
    check_case=check_case,
    make_inputs=make_inputs,
    golden=run_golden,
    outputs=outputs,
    empty_outputs=empty_outputs,
    bytes=compulsory_bytes,
    flops=flops,
    mutates=("params", "master", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"),
    # GradScaler's unscale_ and clip_grad_norm_ write the gradients in place
    consumes=("grads",),
    case_stats=adamw_stats.case_stats,
    diagnosis=DIAGNOSIS,
))
