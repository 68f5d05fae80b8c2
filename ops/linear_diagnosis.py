"""What the linear op's axes and features mean to the failure diagnosis.

dx has the axes (row, input), dw (output, input), db (output). The period search of
`suite/diagnosis/` finds where along them the wrong elements sit; this module adds the
reference terms, the case features, the causes and the rules from evidence to cause.

Terms are the float64 backward under the hypothesis of each bug minus the golden, so
"error = 1 x term" says that hypothesis is the bug:

    dw stored transposed (dWᵀ in dw's memory order); db summed over the columns (row j's
    sum, 0 past M); the derivative taken at the activation's output; the other GELU
    form's derivative; dx without the derivative; dw from x instead of act(x); db summed
    in the case dtype row after row; db as the sum of dY where it sums dZ; Z recomputed
    without the bias; a transposed input read as row-major from its storage; dw and db
    over the whole row tiles only (the last M % T rows left out); dw accumulated in the
    case dtype, a partial of every few rows added at a time.

The causes and the alignment they are stated in are in ops/linear_causes.py, shared with
the mutants that plant them.
"""

from __future__ import annotations

from typing import Mapping

import torch

from bwd_suite.golden import linear as golden
from bwd_suite.ops.linear_causes import ALIGN, Cause
from bwd_suite.suite.diagnosis import (COEF_TOL, EXACT_RESIDUAL, GENERIC_RULES, MIN_SCALED,
                                       CauseSpec, DiagnosisSpec, Evidence, Feature, Generic,
                                       Rule, Term, fallback, generic_causes)

F64 = torch.float64
OUTPUTS = ("dx", "dw", "db")
# elements of dx (M K) up to which the terms are computed (each a float64 backward)
MAX_TERM_ELEMENTS = 1 << 22
DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}
# row tiles whose last, partial tile a sum over M may leave out (the tile sizes of GEMMs)
ROW_TILES = (8, 16, 32, 64, 128)
# rows per partial of a dw accumulated in the dtype (1: row by row; more: split-K slices)
PARTIAL_ROWS = (1, 8, 16, 32, 64, 128)
# M N K up to which the 16-bit dw sums are computed (one float64 GEMM slice per partial)
MAX_SPLIT_WORK = 1 << 26
# the inputs a port may read ignoring their layout, by the flag that transposes them (the
# saved z is stored like dy, a like x)
LAYOUT_FLAGS = {"x": "x_t", "a": "x_t", "w": "w_t", "dy": "dy_t", "z": "dy_t"}


# ---------------------------------------------------------------- case features

def case_features(p: Mapping) -> dict:
    act = p["activation"]
    return {
        "activation": act != "none",
        "smooth": act in ("gelu", "silu"),
        "gelu": act == "gelu",
        "gelu_erf": act == "gelu" and p["approximate"] == "none",
        "act_input": act != "none" and p["act_at"] == "input",
        "act_output": act != "none" and p["act_at"] == "output",
        "bias": bool(p["bias"]),
        "low_precision": p["dtype"] != "float32",
        "unaligned_n": p["n"] % ALIGN != 0,
        "matrix_w": p["n"] > 1 and p["k"] > 1,
        "recompute": bool(p["recompute"]),
        "transposed": bool(p["x_t"] or p["w_t"] or p["dy_t"]),
        "rows": p["m"],
    }


FEATURES = (
    Feature("activation", "with an activation"),
    Feature("smooth", "with gelu or silu"),
    Feature("gelu", "with gelu"),
    Feature("gelu_erf", "with the erf gelu"),
    Feature("act_input", "with the activation on the input"),
    Feature("act_output", "with the activation after the GEMM"),
    Feature("bias", "with bias"),
    Feature("low_precision", "with 16-bit tensors"),
    Feature("unaligned_n", f"when N is not a multiple of {ALIGN}"),
    Feature("matrix_w", "when w has more than one row and column"),
    Feature("recompute", "with the activation's input or output recomputed"),
    Feature("transposed", "with a transposed x, w or dy"),
    Feature("rows", "the number of rows M", numeric=True),
)

AXES = {"dx": ("row", "input"), "dw": ("output", "input"), "db": ("output",)}
PERIODS = {"output": (ALIGN,), "input": (ALIGN,)}


def shapes(p: Mapping) -> dict:
    found = {"dx": (p["m"], p["k"]), "dw": (p["n"], p["k"])}
    if p["bias"]:
        found["db"] = (p["n"],)
    return found


def regions(p: Mapping, t: Mapping, output: str, shape: tuple) -> list:
    """No fixed regions: the period search along rows and columns finds them."""
    return []


# ---------------------------------------------------------------- terms

def _backward(p: Mapping, t: Mapping, attrs: Mapping, **override) -> dict:
    kw = dict(bias=t.get("bias"), z=t.get("z"), a=t.get("a"), activation=attrs["activation"],
              approximate=attrs["approximate"], act_at=attrs["act_at"],
              has_bias=t.get("bias") is not None)
    kw.update(override)
    return golden.backward(t["x"], t["w"], t["dy"], **kw)


def _at_output(p: Mapping, t: Mapping, attrs: Mapping) -> dict:
    """The backward with act' taken at the activation's output."""
    act, approx = attrs["activation"], attrs["approximate"]
    x, w, dy = t["x"], t["w"], t["dy"]
    if attrs["act_at"] == "input":
        out = _backward(p, t, attrs)
        out["dx"] = (dy @ w) * golden.act_grad(golden.act(x, act, approx), act, approx)
        return out
    pre = t["z"] if t.get("z") is not None else golden.preactivation(x, w, t.get("bias"))
    dz = dy * golden.act_grad(golden.act(pre, act, approx), act, approx)
    out = {"dx": dz @ w, "dw": dz.t() @ x}
    if t.get("bias") is not None:
        out["db"] = dz.sum(0)
    return out


def _transposed_store(dw: torch.Tensor, col_major: bool) -> torch.Tensor:
    """What a store of dWᵀ in dw's memory order leaves, read back as dw."""
    N, K = dw.shape
    mem = torch.empty(N * K, dtype=dw.dtype, device=dw.device)
    mem.as_strided((K, N), (1, K) if col_major else (N, 1)).copy_(dw.t())
    return mem.as_strided((N, K), (1, N) if col_major else (K, 1)).clone()


def _summed(t: Mapping, attrs: Mapping) -> torch.Tensor:
    """The matrix db sums over its rows: dZ after the GEMM, dY on the input."""
    if attrs["act_at"] == "input" or attrs["activation"] == "none":
        return t["dy"]
    pre = t["z"] if t.get("z") is not None else golden.preactivation(t["x"], t["w"], t["bias"])
    return t["dy"] * golden.act_grad(pre, attrs["activation"], attrs["approximate"])


def _read_row_major(v: torch.Tensor) -> torch.Tensor:
    """A column-major (R, C) tensor's storage read as row-major (R, C)."""
    return v.t().contiguous().reshape(v.shape)


def _layout_terms(p: Mapping, t: Mapping, attrs: Mapping, base: dict, wrong: set) -> dict:
    """{output: [Term]}: the backward with transposed inputs read row-major from their
    storage (a kernel that takes a data pointer and ignores the strides): each alone, the
    pairs stored alike (dy and z, x and a), and all of them."""
    names = [n for n, flag in LAYOUT_FLAGS.items() if p[flag] and t.get(n) is not None]
    pairs = [[n for n in names if LAYOUT_FLAGS[n] == flag] for flag in ("x_t", "dy_t")]
    groups = {tuple(g) for g in [[n] for n in names] + pairs + [names] if g}
    found = {o: [] for o in wrong}
    for group in sorted(groups):
        other = _backward(p, dict(t, **{n: _read_row_major(t[n]) for n in group}), attrs)
        for o in wrong & set(other):
            found[o].append(Term("layout_" + "_".join(group), f"{', '.join(group)} read as "
                                 "row-major from storage", other[o] - base[o]))
    return found


def _wgrad_factors(t: Mapping, attrs: Mapping) -> tuple:
    """(L, R) with dw = Lᵀ R: dZ and x after the GEMM, dY and act(x) on the input."""
    if attrs["act_at"] == "input" and attrs["activation"] != "none":
        a = t["a"] if t.get("a") is not None else golden.act(t["x"], attrs["activation"],
                                                              attrs["approximate"])
        return t["dy"], a
    return _summed(t, attrs), t["x"]


def _low_precision_dw(left: torch.Tensor, right: torch.Tensor, dt, rows: int) -> torch.Tensor:
    """dw = leftᵀ right with a `dt` accumulator, a partial of `rows` rows added at a time."""
    acc = torch.zeros(left.shape[1], right.shape[1], dtype=dt, device=left.device)
    for r in range(0, left.shape[0], rows):
        acc = (acc.to(F64) + left[r:r + rows].t() @ right[r:r + rows]).to(dt)
    return acc.to(F64)


def terms(p: Mapping, t: Mapping, attrs: Mapping, ev: Evidence) -> dict:
    """Every term of the wrong, finite outputs (an unwritten or NaN output has none)."""
    wrong = set(ev.wrong) - set(ev.nonfinite)
    if not wrong or p["m"] * max(p["k"], p["n"]) > MAX_TERM_ELEMENTS:
        return {}
    base = _backward(p, t, attrs)
    found = {o: [Term("scaled", f"{o} itself", base[o])] for o in wrong}
    act = attrs["activation"] != "none"
    if "dw" in wrong and p["n"] > 1 and p["k"] > 1:
        found["dw"].append(Term("dw_transposed", "dw stored transposed (dWᵀ in dw's order)",
                                _transposed_store(base["dw"], p["w_t"]) - base["dw"]))
    if "db" in wrong:
        summed = _summed(t, attrs)
        M, N = summed.shape
        rows = torch.zeros_like(base["db"])
        rows[:min(M, N)] = summed.sum(1)[:min(M, N)]
        found["db"].append(Term("db_axis", "db summed over the columns (row sums)",
                                rows - base["db"]))
        dt = DTYPES[p["dtype"]]
        if dt != torch.float32:
            acc = torch.zeros(N, dtype=dt, device=summed.device)
            for m in range(M):
                acc = (acc.to(F64) + summed[m]).to(dt)
            found["db"].append(Term("db_low_precision", "db summed in the case dtype, row by "
                                    "row", acc.to(F64) - base["db"]))
    if act:
        other = _at_output(p, t, attrs)
        for o in wrong & set(other):
            found[o].append(Term("derivative_at_output", "the derivative taken at the "
                                 "activation's output", other[o] - base[o]))
        if attrs["activation"] == "gelu":
            flip = "tanh" if attrs["approximate"] == "none" else "none"
            form = _backward(p, t, attrs, approximate=flip)
            for o in wrong & set(form):
                found[o].append(Term("gelu_form", f"the {flip} GELU's derivative",
                                     form[o] - base[o]))
        if "dx" in wrong:
            plain = t["dy"] @ t["w"]
            found["dx"].append(Term("dx_no_derivative", "dx without the derivative (dY w)",
                                    plain - base["dx"]))
        if "dw" in wrong and attrs["act_at"] == "input":
            found["dw"].append(Term("wgrad_preactivation", "dw from x, not act(x)",
                                    t["dy"].t() @ t["x"] - base["dw"]))
        if attrs["act_at"] == "output":
            if "db" in wrong:
                found["db"].append(Term("db_no_derivative", "db = Σ dY, not Σ dZ",
                                        t["dy"].sum(0) - base["db"]))
            if t.get("bias") is not None:
                z0 = golden.preactivation(t["x"], t["w"], None)
                other = _backward(p, t, attrs, z=z0)
                for o in wrong & set(other):
                    found[o].append(Term("z_without_bias", "act' at Z recomputed without "
                                         "the bias", other[o] - base[o]))
    for o, ts in _layout_terms(p, t, attrs, base, wrong).items():
        found[o] += ts
    M = p["m"]
    tiled = sorted({M - M % tile for tile in ROW_TILES if 0 < M - M % tile < M})
    for m_kept in tiled if wrong & {"dw", "db"} else ():
        head = dict(t, dy=t["dy"].clone())
        head["dy"][m_kept:] = 0
        other = _backward(p, head, attrs)
        for o in wrong & {"dw", "db"} & set(other):
            found[o].append(Term(f"rows_tail_{m_kept}", f"{o} over the first {m_kept} "
                                 "rows only", other[o] - base[o]))
    dt = DTYPES[p["dtype"]]
    if "dw" in wrong and dt != torch.float32 and M * p["n"] * p["k"] <= MAX_SPLIT_WORK:
        left, right = _wgrad_factors(t, attrs)
        for rows in PARTIAL_ROWS:
            if rows == 1 or rows < M:
                found["dw"].append(Term(f"dw_low_precision_{rows}", f"dw accumulated in "
                                        f"the dtype, {rows} rows a partial",
                                        _low_precision_dw(left, right, dt, rows) - base["dw"]))
    return found


# ---------------------------------------------------------------- causes and rules

def _any(family: str, outputs=OUTPUTS):
    return lambda e: any(e.explains(o, family, 1.0) for o in outputs)


def _db_unwritten(e: Evidence) -> bool:
    """db holds poison, every element of it, and nothing else is wrong."""
    n_bad, numel = e.wrong_counts.get("db", (0, 1))
    return "db" in e.nonfinite and n_bad == numel and e.only("db")


def _db_low_precision(e: Evidence) -> bool:
    """db alone wrong in a 16-bit case, as a 16-bit row-by-row sum or spread over it."""
    return e.only("db") and e.f("low_precision") and (
        e.explains("db", "db_low_precision", 1.0) or
        (e.finite("db") and e.spread("db") and not e.explains("db", "db_axis", 1.0)))


def _scaled(e: Evidence) -> bool:
    """A wrong output of MIN_SCALED elements or more is c x itself for some c (not ~0,
    not -1), exactly (on fewer, any error is some multiple of the output)."""
    return any(e.finite(o) and e.wrong_counts.get(o, (0, 0))[1] >= MIN_SCALED and any(
        abs(t.coef) > COEF_TOL and abs(t.coef + 1) > COEF_TOL and t.residual <= EXACT_RESIDUAL
        for t in e.fit(o, "scaled")) for o in OUTPUTS)


def _dw_low_precision(e: Evidence) -> bool:
    """dw alone wrong, and as a sum in the dtype of partials of some rows."""
    return e.only("dw") and e.explains("dw", "dw_low_precision", 1.0)


C = Cause
CAUSES = (
    CauseSpec(C.DW_TRANSPOSED, "dw stored transposed",
              "dw's store: (N, K) at its own leading dimension, not dWᵀ (a GEMM computing "
              "dWᵀ = xᵀ dZ needs its output described as transposed)",
              requires=lambda f: f["matrix_w"]),
    CauseSpec(C.DB_AXIS, "db reduced over the wrong axis",
              "db sums the gradient over the M rows (the GEMM's k of the wgrad), one value a "
              "column", requires=lambda f: f["bias"]),
    CauseSpec(C.DERIVATIVE_AT_OUTPUT, "the activation's derivative taken at its output",
              "act' is evaluated at the activation's input (Z, or x on the input side): the "
              "saved pre-activation, not Y", requires=lambda f: f["smooth"]),
    CauseSpec(C.GELU_FORM, "the other GELU form's derivative (tanh for erf, or erf for tanh)",
              "approximate = none is the erf GELU; cuBLASLt's DGELU and PyTorch's CUDA GELU "
              "epilogue are the tanh form", requires=lambda f: f["gelu"]),
    CauseSpec(C.DX_NO_DERIVATIVE, "dx without the activation's derivative",
              "dx = dZ w (after the GEMM) or (dY w) act'(x) (on the input): the epilogue or "
              "the elementwise step was skipped", requires=lambda f: f["activation"]),
    CauseSpec(C.DB_LOW_PRECISION, "db accumulated in 16 bits",
              "the bias gradient's column sum accumulates in fp32 (the BGRAD epilogue does; "
              "a sum in the dtype loses the small terms)",
              requires=lambda f: f["bias"] and f["low_precision"]),
    CauseSpec(C.DB_UNWRITTEN, "db left unwritten",
              "every path writes db: a fused epilogue that is not available (no heuristic "
              "for the alignment) must not fall back to a GEMM that leaves it as allocated",
              requires=lambda f: f["bias"]),
    CauseSpec(C.WGRAD_PREACTIVATION, "dw from the activation's input, not its output",
              "dw = dYᵀ act(x): the saved (or recomputed) activation output, not x",
              requires=lambda f: f["act_input"]),
    CauseSpec(C.SCALED, "a gradient off by a constant factor",
              "every constant factor: alpha of the GEMMs, a 1/M of a mean"),
    CauseSpec(C.DB_NO_DERIVATIVE, "db without the activation's derivative (Σ dY, not Σ dZ)",
              "after the GEMM the bias is inside the activation: db sums dZ = dY act'(Z), "
              "the same tensor both GEMMs read", requires=lambda f: f["act_output"] and f["bias"]),
    CauseSpec(C.Z_WITHOUT_BIAS, "the pre-activation recomputed without the bias",
              "a recomputed Z is x wᵀ + b: the bias enters act'(Z) as well as db",
              requires=lambda f: f["act_output"] and f["bias"]),
) + generic_causes(
    remainder=lambda f: True, tile_offset=lambda f: True, tile_position=lambda f: True,
    stride=lambda f: f["matrix_w"], first_index=lambda f: True, last_index=lambda f: True,
    one_index=lambda f: True, precision=lambda f: f["low_precision"])

# Order: the exact term fits first; the generic rules only where none of these holds.
OWN_RULES = (
    Rule(C.DB_UNWRITTEN, _db_unwritten),
    Rule(C.DW_TRANSPOSED, lambda e: e.explains("dw", "dw_transposed", 1.0)),
    Rule(C.DB_AXIS, lambda e: e.explains("db", "db_axis", 1.0)),
    Rule(C.GELU_FORM, _any("gelu_form")),
    Rule(C.DERIVATIVE_AT_OUTPUT, _any("derivative_at_output")),
    Rule(C.DX_NO_DERIVATIVE, lambda e: e.explains("dx", "dx_no_derivative", 1.0)),
    Rule(C.WGRAD_PREACTIVATION, lambda e: e.explains("dw", "wgrad_preactivation", 1.0)),
    Rule(C.DB_NO_DERIVATIVE, lambda e: e.explains("db", "db_no_derivative", 1.0)),
    Rule(C.Z_WITHOUT_BIAS, _any("z_without_bias")),
    Rule(Generic.STRIDE, _any("layout")),
    Rule(Generic.REMAINDER, _any("rows_tail", ("dw", "db"))),
    Rule(Generic.PRECISION, _dw_low_precision),
    Rule(C.DB_LOW_PRECISION, _db_low_precision),
    Rule(C.SCALED, _scaled),
)
RULES = OWN_RULES + fallback(OWN_RULES, GENERIC_RULES)

SPEC = DiagnosisSpec(causes=CAUSES, rules=RULES, features=FEATURES,
                     case_features=case_features, regions=regions, terms=terms,
                     axes=AXES, periods=PERIODS, shapes=shapes)
