"""Op contract of the softmax backward along the last dimension, with an optional fused
dropout backward (LightSeq2's attention softmax backward; seed 002 section 3).

Inputs: y (rows, N), the saved softmax output in the case dtype; dy (rows, N), the
upstream gradient (of the dropout output with dropout, else of y), same dtype; mask
(rows, N) bool keep mask with dropout, else None. Attribute: scale = 1/(1-p) with
dropout, else None. Output: dx (rows, N) in the case dtype,

    g = dy * mask * scale (or dy);  dx = y * (g - sum(g * y, -1)).

The float64 truth is `golden.softmax.backward`, computed from the given (rounded) y.

Input values: y = softmax(logit_scale * N(0, 1)) in fp32, rounded once; dy = N(0, 1), or
dy_mean + dy_corr * y' + N(0, 1) with y' = y standardized per row, plus dy_peak at each
row's last element (`suite.inputs.upstream`).

Mask patterns (with dropout): `random` (each element kept with probability 1-p),
`all_kept` (every element kept; the scale still applies), `all_dropped_rows` (rows
1, 4, 7, ... fully dropped, rows 2, 5, 8, ... fully kept, the others random).
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Mapping

import torch

from bwd_suite.golden import softmax as golden
from bwd_suite.ops.softmax_diagnosis import SPEC as DIAGNOSIS
from bwd_suite.suite import inputs as mk
from bwd_suite.suite.opspec import CaseInputs, OpSpec, OutputSpec, TolClass
from bwd_suite.suite.params import FloatRange, IntRange, Param, ParamSet, upstream_params
from bwd_suite.suite.registry import register_op

MASK_PATTERNS = ("random", "all_kept", "all_dropped_rows")

PARAMS = ParamSet((
    Param("rows", "int", 64, "rows (B*H*L for attention scores)", minimum=1,
          id_token=lambda v: f"R{v}", domain=IntRange(1, 1 << 20, axis=True)),
    Param("length", "int", 1000, "N, the softmax dimension (last, contiguous)", minimum=1,
          id_token=lambda v: f"N{v}", domain=IntRange(1, 1 << 20, axis=True)),
    Param("dtype", "str", "bfloat16", "dtype of y, dy and dx",
          choices=("float32", "float16", "bfloat16"), id_token=lambda v: mk.DTYPE_SHORT[v]),
    Param("dropout", "bool", False, "fused dropout backward: a keep mask and 1/(1-p)",
          id_token=lambda v: "drop" if v else ""),
    Param("p", "float", 0.0, "drop probability in [0, 1) (with dropout only)", minimum=0.0,
          id_token=lambda v: "" if v == 0 else f"p{float(v)!r}",
          domain=FloatRange(0.0, 1.0, special=(0.0, 0.1, 0.5, 0.9, 0.999), high_open=True)),
    Param("mask", "str", "random", "keep-mask pattern (with dropout only)",
          choices=MASK_PATTERNS,
          id_token=lambda v: {"random": "", "all_kept": "mask-allkept",
                              "all_dropped_rows": "mask-droprows"}[v]),
    Param("logit_scale", "float", 1.0, "standard deviation of the softmax input (large "
          "values give near one-hot y)", minimum=0.0,
          id_token=lambda v: "" if v == 1.0 else f"ls{float(v)!r}",
          domain=FloatRange(0.0, 100.0, special=(1.0, 0.0, 10.0, 30.0, 100.0))),
    *upstream_params("dy", "a sum(dy*y) that does not shrink like 1/sqrt(N)",
                     "the softmax output standardized per row", "the last element of every row"),
), fuzz_bounds=lambda p, device: fuzz_bounds(p, device))

MAX_FP16_G = 2.0 ** 14  # the largest |dy * scale| drawn in fp16 (see fuzz_bounds)


def fuzz_bounds(p: Mapping, device: str):
    """Valid cases the fuzzer does not draw, with the parameter to blame: fp16 where
    g = dy * mask / (1 - p) may overflow inside the same-dtype yardstick (a drop
    probability of 0.999 scales by 1000), though dx itself fits."""
    if p["dtype"] != "float16":
        return None
    scale = 1 / (1 - p["p"]) if p["dropout"] else 1.0
    # y standardized reaches sqrt(N) on a one-hot row
    big = 4 + abs(p["dy_mean"]) + abs(p["dy_corr"]) * math.sqrt(p["length"]) \
        + abs(p["dy_peak"])
    if scale * big > MAX_FP16_G:
        blame = next((k for k in ("dy_peak", "dy_mean", "dy_corr") if p[k]), "p")
        return blame, "dy / (1 - p) may overflow fp16 in the yardstick"
    return None


def check_case(p: Mapping):
    if p["p"] >= 1:
        return "p", f"drop probability {p['p']!r} must be below 1 (scale 1/(1-p))"
    if not p["dropout"]:
        if p["p"] != 0:
            return "p", "has no effect without dropout = true"
        if p["mask"] != "random":
            return "mask", "has no effect without dropout = true"
    if p["mask"] == "all_dropped_rows" and p["rows"] < 2:
        return "mask", "all_dropped_rows needs rows >= 2 (row 1 is the first dropped row)"
    return None


# ---------------------------------------------------------------- input factory

def keep_threshold(p: float) -> float:
    """t with P(Z >= t) = 1 - p for Z ~ N(0, 1): `draw >= t` keeps with probability 1-p."""
    return -math.inf if p <= 0 else NormalDist().inv_cdf(p)


def keep_mask(p: Mapping, gen: torch.Generator, device: torch.device) -> torch.Tensor:
    """Bool keep mask (rows, N) of the case's pattern, from one randn draw."""
    R, N = p["rows"], p["length"]
    draw = mk.randn((R, N), torch.float32, gen, device)
    if p["mask"] == "all_kept":
        return torch.ones_like(draw, dtype=torch.bool)
    keep = draw >= keep_threshold(p["p"])
    if p["mask"] == "all_dropped_rows":
        keep[1::3] = False
        keep[2::3] = True
    return keep


def make_inputs(p: Mapping, seed: int, device: torch.device) -> CaseInputs:
    gen = mk.generator(seed)
    R, N = p["rows"], p["length"]
    dt = mk.DTYPES[p["dtype"]]
    logits = mk.randn((R, N), torch.float32, gen, device, scale=p["logit_scale"])
    y = torch.softmax(logits, dim=-1).to(dt)  # fp32 softmax, rounded once to the dtype
    del logits
    dy = mk.randn((R, N), dt, gen, device)
    if p["dy_mean"] or p["dy_corr"] or p["dy_peak"]:
        dy = mk.upstream(dy, y.double(), p["dy_mean"], p["dy_corr"], p["dy_peak"]).to(dy.dtype)
    mask = keep_mask(p, gen, device) if p["dropout"] else None
    return CaseInputs(
        tensors={"y": y, "dy": dy, "mask": mask},
        attrs={"scale": 1.0 / (1.0 - p["p"]) if p["dropout"] else None},
    )



# ---------------------------------------------------------------- outputs

def outputs(p: Mapping):
    return [OutputSpec("dx", TolClass.ELEMENTWISE)]


def empty_outputs(inputs: CaseInputs, p: Mapping) -> dict:
    return {"dx": mk.empty_like_layout(inputs.tensors["y"])}


def run_golden(y, dy, mask, scale):
    return golden.backward(y, dy, mask=mask, scale=scale)


# ---------------------------------------------------------------- roofline

def compulsory_bytes(p: Mapping) -> int:
    """y and dy read, dx written (3 R N element size), the mask read with dropout (1 byte
    per element)."""
    es = torch.finfo(mk.DTYPES[p["dtype"]]).bits // 8
    n = p["rows"] * p["length"]
    return 3 * n * es + (n if p["dropout"] else 0)


def flops(p: Mapping) -> int:
    """Per element: the dot's multiply-add (2), the subtraction and the product with y
    (2), and with dropout the mask and the scale (2)."""
    return p["rows"] * p["length"] * (4 + (2 if p["dropout"] else 0))


SPEC = register_op(OpSpec(
    name="softmax",
    doc="softmax backward along the last dim, optional fused dropout backward: dx",
    params=PARAMS,
    check_case=check_case,
    make_inputs=make_inputs,
    golden=run_golden,
    outputs=outputs,
    empty_outputs=empty_outputs,
    bytes=compulsory_bytes,
    flops=flops,
    diagnosis=DIAGNOSIS,
))
