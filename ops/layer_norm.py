"""Op contract of the LayerNorm backward over the last dimension.

Inputs: x (rows, N) and dy (rows, N) in the case dtype, gamma (N,) in fp32 or x's dtype
(None without affine), and the forward's saved statistics mean and rstd (rows,) in fp32,
as PyTorch's CUDA forward saves them. No attributes: eps only enters through rstd.
Outputs: dx like x; with affine dgamma and dbeta like gamma. The float64 truth is
`golden.layer_norm.backward` at the saved statistics (its docstring says why).

Input values: x = x_mean + x_std * N(0, 1) rounded to the case dtype, dy = N(0, 1)
(or dy_mean + dy_corr * y' + N(0, 1), y' = xhat * gamma standardized per row, plus dy_peak
at each row's last element; `suite.inputs.upstream`),
gamma = 1 + N(0, 0.5^2); mean and rstd are the float64 statistics of the rounded x,
rounded once to fp32 (the best a forward could save).
"""

from __future__ import annotations

import math
from typing import Mapping

import torch

from bwd_suite.golden import layer_norm as golden
from bwd_suite.ops.layer_norm_diagnosis import SPEC as DIAGNOSIS
from bwd_suite.suite import inputs as mk
from bwd_suite.suite.opspec import CaseInputs, OpSpec, OutputSpec, TolClass
from bwd_suite.suite.params import FloatRange, IntRange, Param, ParamSet, upstream_params
from bwd_suite.suite.registry import register_op


# where the CPU yardstick stays well inside the tolerance (fuzz_bounds): |x_mean| * rstd
# (the large-mean cases' 1000 + N(0, 1) are at 1000, the edge), and rows of 16-bit
# column sums
MAX_AMPLIFICATION = 200.0
MAX_DGAMMA_AMPLIFICATION = 1000.0
MAX_16BIT_ROWS = 128


def _num(v) -> str:
    return f"{float(v):g}"


PARAMS = ParamSet((
    Param("rows", "int", 64, "M, rows normalized independently", minimum=1,
          id_token=lambda v: f"M{v}", domain=IntRange(1, 1 << 20, axis=True)),
    Param("hidden", "int", 1024, "N, the normalized (last) dimension", minimum=1,
          id_token=lambda v: f"N{v}", domain=IntRange(1, 1 << 16, axis=True)),
    Param("dtype", "str", "bfloat16", "dtype of x, dy and dx",
          choices=("float32", "float16", "bfloat16"), id_token=lambda v: mk.DTYPE_SHORT[v]),
    Param("weight_dtype", "str", "float32", "float32, or match: the dtype of x",
          choices=("float32", "match"), id_token=lambda v: "" if v == "float32" else "wmatch"),
    Param("affine", "bool", True, "with gamma and beta (outputs dgamma, dbeta)",
          id_token=lambda v: "" if v else "noaffine"),
    Param("eps", "float", 1e-5, "eps of the forward, inside rstd = 1/sqrt(var + eps)",
          minimum=0.0, id_token=lambda v: "" if v == 1e-5 else f"eps{_num(v)}",
          # not 0 when fuzzing: a row that rounding makes constant would have rstd = inf
          domain=FloatRange(1e-12, 0.1, special=(1e-5, 1e-12, 1e-6, 1e-2))),
    Param("x_mean", "float", 0.0, "offset of x (1000: large-mean rows)",
          id_token=lambda v: "" if v == 0.0 else f"mean{_num(v)}",
          domain=FloatRange(-1e4, 1e4, special=(0.0, 1.0, 1000.0, -1000.0, 1e4))),
    Param("x_std", "float", 1.0, "standard deviation of x (small: tiny variances)",
          minimum=0.0, id_token=lambda v: "" if v == 1.0 else f"std{_num(v)}",
          domain=FloatRange(0.0, 100.0, special=(1.0, 0.0, 1e-6, 1e-3, 100.0))),
    *upstream_params("dy", "a mean(dy) that does not shrink like 1/sqrt(N)",
                     "the forward output xhat*gamma standardized per row: a mean(dy*xhat) "
                     "that does not shrink", "the last element of every row"),
), fuzz_bounds=lambda p, device: fuzz_bounds(p, device))


def fuzz_bounds(p: Mapping, device: str):
    """Valid cases the fuzzer does not draw on this device, with the parameter to blame.

    On the CPU the yardstick, PyTorch's CPU kernel, is wrong by itself here (measured,
    torch 2.13), and a fuzzed torch_ref would be reported:
    - rows of 1 or 2 columns: dx is 0 up to eps, all cancellation (the x form too;
      cases/layer_norm/basic.toml keeps some of them gpu-only);
    - where the raw x it sums cancels: in dx by |x_mean| * rstd (rstd bounded through
      eps), in dgamma by |x_mean| / x_std whatever eps, both scaled by a shifted
      upstream gradient; a spread below a few ulps of x_mean in the case dtype may round
      to constant rows, so it counts as none;
    - the dgamma/dbeta column sums of 16-bit rows, which it accumulates in the 16-bit
      dtype (0.4 relative off on 1365 bf16 rows of dy = 10 + N(0, 1); 0.2 on 64 rows
      with a peak of 269): past a hundred rows, or with shifted upstream gradients."""
    if device != "cpu":
        return None
    if p["hidden"] <= 2:
        return "hidden", ("1-2 columns: dx is 0 up to eps, all cancellation, and the CPU "
                          "yardstick and the x form leave errors past the fp32 ceiling")
    shifted = [k for k in ("dy_peak", "dy_mean", "dy_corr") if p[k]]
    dt = mk.DTYPES[p["dtype"]]
    ulp = abs(p["x_mean"]) * torch.finfo(dt).eps
    spread = p["x_std"] if p["x_std"] >= 4 * ulp else 0.0
    shift = 1 + abs(p["dy_mean"]) + abs(p["dy_corr"])
    if abs(p["x_mean"]) * shift > MAX_AMPLIFICATION * math.sqrt(spread ** 2 + p["eps"]):
        return "x_mean", (f"|x_mean| * rstd * (1 + |dy_mean| + |dy_corr|) above "
                          f"{MAX_AMPLIFICATION:g}: the CPU yardstick's cancellation in dx "
                          f"alone passes the tolerance")
    # dgamma = sum(dy * xhat) cancels by |x_mean| / spread, whatever eps
    if p["affine"] and abs(p["x_mean"]) * shift > MAX_DGAMMA_AMPLIFICATION * spread:
        return "x_mean", (f"|x_mean| / x_std * (1 + |dy_mean| + |dy_corr|) above "
                          f"{MAX_DGAMMA_AMPLIFICATION:g}: the CPU yardstick's cancellation "
                          f"in dgamma alone passes the tolerance")
    if p["affine"] and dt != torch.float32:
        if shifted:
            return shifted[0], ("the CPU yardstick sums dgamma and dbeta in "
                                f"{p['dtype']}: large terms leave errors past the tolerance")
        if p["rows"] > MAX_16BIT_ROWS:
            return "rows", (f"more than {MAX_16BIT_ROWS} rows: the CPU yardstick sums "
                            f"dgamma and dbeta in {p['dtype']}")
    return None


def check_case(p: Mapping):
    if p["eps"] <= 0 and (p["hidden"] == 1 or p["x_std"] == 0):
        return "eps", "eps = 0 with a constant row makes rstd infinite"
    if p["weight_dtype"] != "float32" and not p["affine"]:
        return "weight_dtype", "has no effect without affine = true"
    return None


# ---------------------------------------------------------------- input factory

def make_inputs(p: Mapping, seed: int, device: torch.device) -> CaseInputs:
    gen = mk.generator(seed)
    M, N = p["rows"], p["hidden"]
    dt = mk.DTYPES[p["dtype"]]
    wdt = dt if p["weight_dtype"] == "match" else torch.float32
    # N(0, x_std) drawn in fp32, shifted in float64, rounded once to the case dtype
    x = (mk.randn((M, N), torch.float32, gen, device, scale=p["x_std"]).double()
         + p["x_mean"]).to(dt)
    dy = mk.randn((M, N), dt, gen, device)
    gamma = None
    if p["affine"]:
        gamma = (mk.randn((N,), torch.float32, gen, device, scale=0.5).double() + 1).to(wdt)
    mean, rstd = golden.statistics(x.double(), p["eps"])
    if p["dy_mean"] or p["dy_corr"] or p["dy_peak"]:
        y = (x.double() - mean[:, None]) * rstd[:, None]
        if gamma is not None:
            y = y * gamma.double()
        dy = mk.upstream(dy, y, p["dy_mean"], p["dy_corr"], p["dy_peak"]).to(dy.dtype)
    return CaseInputs(
        tensors={"x": x, "dy": dy, "gamma": gamma, "mean": mean.float(),
                 "rstd": rstd.float()},
        attrs={},
    )



# ---------------------------------------------------------------- outputs

def outputs(p: Mapping):
    outs = [OutputSpec("dx", TolClass.ELEMENTWISE)]
    if p["affine"]:
        outs += [OutputSpec("dgamma", TolClass.REDUCTION),
                 OutputSpec("dbeta", TolClass.REDUCTION)]
    return outs


def empty_outputs(inputs: CaseInputs, p: Mapping) -> dict:
    t = inputs.tensors
    out = {"dx": torch.empty_like(t["x"], memory_format=torch.contiguous_format)}
    if t["gamma"] is not None:
        out["dgamma"] = torch.empty_like(t["gamma"], memory_format=torch.contiguous_format)
        out["dbeta"] = torch.empty_like(t["gamma"], memory_format=torch.contiguous_format)
    return out


def run_golden(x, dy, gamma, mean, rstd):
    return golden.backward(x, dy, mean, rstd, gamma=gamma)


# ---------------------------------------------------------------- roofline

def _sizes(p):
    es = torch.finfo(mk.DTYPES[p["dtype"]]).bits // 8
    ws = es if p["weight_dtype"] == "match" else 4
    return p["rows"], p["hidden"], es, ws


def compulsory_bytes(p: Mapping) -> int:
    """x and dy read, dx written (3 M N es); mean and rstd read (8 M); with affine gamma
    read and dgamma, dbeta written (3 N ws)."""
    M, N, es, ws = _sizes(p)
    return 3 * M * N * es + 8 * M + (3 * N * ws if p["affine"] else 0)


def flops(p: Mapping) -> int:
    """Per element: xhat (2), the two row sums (3), dx (4); with affine g = dy*gamma (1)
    and the dgamma, dbeta column sums (3): 13 M N with affine, 9 M N without."""
    M, N, _, _ = _sizes(p)
    return M * N * (13 if p["affine"] else 9)


SPEC = register_op(OpSpec(
    name="layer_norm",
    doc="LayerNorm backward over the last dim from saved mean/rstd: dx, dgamma, dbeta",
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
