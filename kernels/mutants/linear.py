"""Deliberately broken linear backwards: each plants one bug a hand-written or ported
linear backward gets wrong into an fp32 model of it (`backward_model`), one `Bug` switch
each.

The model computes what golden/linear.py states, in fp32 from the case's tensors, and
stores each output once in its dtype and memory layout:

    output:  dZ = dY act'(Z) (Z the saved z, or x wᵀ + b),  dx = dZ w,  dw = dZᵀ x,  db = Σ dZ
    input:   dx = (dY w) act'(x),  dw = dYᵀ A (A the saved a, or act(x)),  db = Σ dY

With no bug it passes every ci case. The suite must fail every mutant on the ci cases,
and the cross-case diagnosis should name the planted cause (`planted_cause`, a value of
ops.linear_causes.Cause). Registered with kind "mutant", so runs skip them unless asked.
"""

from __future__ import annotations

import enum
from typing import FrozenSet

import torch

from bwd_suite.golden import linear as golden
from bwd_suite.kernels.mutants import Mutant, register
from bwd_suite.ops.linear_causes import ALIGN, Cause

F32 = torch.float32


class Bug(enum.Enum):
    DW_TRANSPOSED = ("dw is stored transposed: the (K x N) matrix dWᵀ written in dw's own "
                     "memory order (a kernel that takes dw's leading dimension for N)")
    DB_WRONG_AXIS = ("db sums the gradient over its N columns instead of its M rows: thread j "
                     "sums row j, rows past M left 0")
    DERIVATIVE_AT_OUTPUT = ("the activation's derivative is taken at its output act(Z) (or "
                            "act(x)) instead of its input")
    TANH_FOR_ERF = ("the tanh GELU's derivative where the case asks for the erf GELU "
                    "(PyTorch's CUDA epilogue path against its CPU one)")
    DX_NO_DERIVATIVE = "dx is computed from dY, without the activation's derivative"
    DB_16BIT_SUM = ("db accumulated in the case dtype, row after row, instead of in fp32")
    DB_UNWRITTEN = (f"db left unwritten when N is not a multiple of {ALIGN} (a fused path "
                    "that falls back to a plain GEMM, as Apex's does, and forgets db)")
    WGRAD_PREACTIVATION = ("dw = dYᵀ x from the activation's input instead of dYᵀ act(x) "
                           "(activation on the input)")


def _store_transposed(dst: torch.Tensor, value: torch.Tensor) -> None:
    """value (N, K) written as its transpose in dst's memory order: dst's memory read as a
    (K, N) matrix stored the way dst is."""
    N, K = value.shape
    col_major = N > 1 and dst.stride(0) == 1
    view = dst.as_strided((K, N), (1, K) if col_major else (N, 1))
    view.copy_(value.t())


def backward_model(*, x, w, dy, bias, z, a, activation, approximate, act_at, out,
                   bugs: FrozenSet[Bug] = frozenset()):
    xf, wf, dyf = x.to(F32), w.to(F32), dy.to(F32)
    form = "tanh" if Bug.TANH_FOR_ERF in bugs and activation == "gelu" else approximate
    act = activation != "none"

    def at(v):  # where the derivative is taken
        return golden.act(v, activation, approximate) if Bug.DERIVATIVE_AT_OUTPUT in bugs else v

    if act_at == "output":
        dz = dyf
        if act:
            pre = z.to(F32) if z is not None else golden.preactivation(
                xf, wf, bias.to(F32) if bias is not None else None)
            dz = dyf * golden.act_grad(at(pre), activation, form)
        dx = (dyf if Bug.DX_NO_DERIVATIVE in bugs else dz) @ wf
        dw = dz.t() @ xf
        summed = dz
    else:
        g = dyf @ wf
        dx = g if not act or Bug.DX_NO_DERIVATIVE in bugs else \
            g * golden.act_grad(at(xf), activation, form)
        acted = xf
        if act and Bug.WGRAD_PREACTIVATION not in bugs:
            acted = a.to(F32) if a is not None else golden.act(xf, activation, approximate)
        dw = dyf.t() @ acted
        summed = dyf
    out["dx"].copy_(dx)
    if Bug.DW_TRANSPOSED in bugs:
        _store_transposed(out["dw"], dw)
    else:
        out["dw"].copy_(dw)
    if "db" in out:
        _bias_grad(out["db"], summed, bugs)


def _bias_grad(db: torch.Tensor, summed: torch.Tensor, bugs) -> None:
    M, N = summed.shape
    if Bug.DB_UNWRITTEN in bugs and N % ALIGN:
        return
    if Bug.DB_WRONG_AXIS in bugs:
        rows = summed.sum(1)
        db.zero_()
        db[:min(M, N)] = rows[:min(M, N)]
    elif Bug.DB_16BIT_SUM in bugs:
        acc = torch.zeros(N, dtype=db.dtype, device=db.device)
        for m in range(M):
            acc = (acc.to(F32) + summed[m]).to(db.dtype)
        db.copy_(acc)
    else:
        db.copy_(summed.sum(0))


def clean(**kw):
    """The model with no bug (not registered: tests wrap it to check it passes)."""
    backward_model(**kw)


def _register(m: Mutant):
    return register("linear", m, lambda m, **kw: backward_model(**kw, bugs=frozenset({m.bug})))


dw_transposed = _register(Mutant(
    "mutant_linear_dw_transposed", Bug.DW_TRANSPOSED, Cause.DW_TRANSPOSED,
    "fail (mismatch) in dw wherever N > 1 and K > 1; error = the transposed store of dw "
    "minus dw; dx, db right"))
db_wrong_axis = _register(Mutant(
    "mutant_linear_db_wrong_axis", Bug.DB_WRONG_AXIS, Cause.DB_AXIS,
    "fail (mismatch) in db only, with bias; error = the row sums (zero past M) minus db"))
derivative_at_output = _register(Mutant(
    "mutant_linear_derivative_at_output", Bug.DERIVATIVE_AT_OUTPUT, Cause.DERIVATIVE_AT_OUTPUT,
    "fail (mismatch) with gelu or silu (relu's derivative is the same at its output): dx, dw "
    "and db after the GEMM, dx on the input"))
tanh_for_erf = _register(Mutant(
    "mutant_linear_tanh_for_erf", Bug.TANH_FOR_ERF, Cause.GELU_FORM,
    "fail (mismatch) with the erf GELU, where the two forms' derivatives differ beyond the "
    "dtype (fp32 cases)"))
dx_no_derivative = _register(Mutant(
    "mutant_linear_dx_no_derivative", Bug.DX_NO_DERIVATIVE, Cause.DX_NO_DERIVATIVE,
    "fail (mismatch) in dx with an activation; error = dY w minus dx; dw, db right"))
db_16bit_sum = _register(Mutant(
    "mutant_linear_db_16bit_sum", Bug.DB_16BIT_SUM, Cause.DB_LOW_PRECISION,
    "fail (mismatch) in db of 16-bit cases with many rows (the ci case of 2048 rows)"))
db_unwritten = _register(Mutant(
    "mutant_linear_db_unwritten", Bug.DB_UNWRITTEN, Cause.DB_UNWRITTEN,
    f"fail (unwritten output) in db, with bias and N not a multiple of {ALIGN}"))
wgrad_preactivation = _register(Mutant(
    "mutant_linear_wgrad_preactivation", Bug.WGRAD_PREACTIVATION, Cause.WGRAD_PREACTIVATION,
    "fail (mismatch) in dw with an activation on the input; error = dYᵀ (x - act(x))"))

ALL = (dw_transposed, db_wrong_axis, derivative_at_output, tanh_for_erf, dx_no_derivative,
       db_16bit_sum, db_unwritten, wgrad_preactivation)
