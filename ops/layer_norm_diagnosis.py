"""What the LayerNorm op's axes and features mean to the failure diagnosis.

The outputs' axes: dx (row, column), dgamma and dbeta (column). The period search of
`suite/diagnosis/` finds where along them the wrong elements sit (one row, the rows
past a block, the columns past the last vector, every column tile but the first); this
module adds the reference terms a wrong output is compared with, the case features that
matter, the causes and the rules from evidence to cause.

Terms come from the float64 golden at changed inputs (`golden.layer_norm.backward` is
cheap): the contribution of some rows to dgamma and dbeta (dy zeroed elsewhere: the last
partial row block, row 0, the first block, the last row), the
golden at a mean taken twice or rounded to the activation dtype, without gamma, and the
row sum's last column. Each says "error = 1 x term" (or -1 x, for a lost contribution)
when its hypothesis is the bug.

The causes and the kernel sizes they are stated in (ROW_BLOCK, VECTOR, COL_TILE) are in
ops/layer_norm_causes.py, shared with the mutants that plant them.
"""

from __future__ import annotations

from typing import Mapping

import torch

from bwd_suite.golden import layer_norm as golden
from bwd_suite.ops.layer_norm_causes import COL_TILE, ROW_BLOCK, VECTOR, Cause
from bwd_suite.suite.diagnosis import (GENERIC_RULES, CauseSpec, DiagnosisSpec, Evidence, Feature,
                                       Hypotheses, Rule, Term, along_axis, generic_causes,
                                       ordered, precision_rule)
from bwd_suite.suite.inputs import DTYPES

# the eps a backward that recomputes the statistics is likely to take (the contract passes
# none): PyTorch's default
DEFAULT_EPS = 1e-5

# ---------------------------------------------------------------- case features

def case_features(p: Mapping) -> dict:
    M, N = p["rows"], p["hidden"]
    return {
        "affine": bool(p["affine"]),
        "low_precision": p["dtype"] != "float32",
        "weight_match": p["weight_dtype"] == "match",
        "large_mean": abs(p["x_mean"]) > 10 * max(p["x_std"], 1e-30),
        "partial_vector": N % VECTOR != 0,
        "row_remainder": M % ROW_BLOCK != 0,
        "multi_row": M > 1,
        "multi_block": M > ROW_BLOCK,
        "multi_tile": N > COL_TILE,
        "hidden": N,
        "rows": M,
    }


FEATURES = (
    Feature("affine", "with affine (gamma, dgamma, dbeta)"),
    Feature("low_precision", "with 16-bit activations"),
    Feature("weight_match", "with gamma in the activation dtype"),
    Feature("large_mean", "with large-mean rows (|mean| > 10 std)"),
    Feature("partial_vector", f"when the columns are not a multiple of {VECTOR}"),
    Feature("row_remainder", f"when the rows are not a multiple of {ROW_BLOCK}"),
    Feature("multi_row", "with more than one row"),
    Feature("multi_block", f"with more than {ROW_BLOCK} rows", implies=("multi_row",)),
    Feature("multi_tile", f"with more than {COL_TILE} columns"),
    Feature("hidden", "the number of columns", numeric=True),
    Feature("rows", "the number of rows", numeric=True),
)

AXES = {"dx": ("row", "column"), "dgamma": ("column",), "dbeta": ("column",)}
PERIODS = {"row": (ROW_BLOCK,), "column": (VECTOR, COL_TILE)}


def shapes(p: Mapping) -> dict:
    M, N = p["rows"], p["hidden"]
    return {"dx": (M, N), "dgamma": (N,), "dbeta": (N,)}


def regions(p: Mapping, t: Mapping, output: str, shape: tuple) -> list:
    """No fixed regions: the period search along rows and columns finds the blocks, the
    vectors and the single rows (suite/diagnosis/)."""
    return []


# ---------------------------------------------------------------- terms

def _golden(t: Mapping, **changed) -> dict:
    a = {k: t[k] for k in ("x", "dy", "mean", "rstd", "gamma")}
    a.update(changed)
    return golden.backward(a["x"], a["dy"], a["mean"], a["rstd"], gamma=a["gamma"])


def terms(p: Mapping, t: Mapping, attrs: Mapping, ev: Evidence) -> dict:
    """Every term of every wrong output (each is one cheap golden evaluation)."""
    x, dy, gamma, mean, rstd = t["x"], t["dy"], t["gamma"], t["mean"], t["rstd"]
    M, N = x.shape
    found = {o: [] for o in ev.wrong}
    base = _golden(t)

    def add(name, doc, values):
        for o, v in values.items():
            if o in found and v is not None:
                found[o].append(Term(name, doc, v))

    def diff(other):
        return {o: other[o] - base[o] for o in base}

    add("mean_twice", "the gradients with the mean subtracted twice",
        diff(_golden(t, mean=2 * mean)))
    dt = DTYPES[p["dtype"]]
    if dt != torch.float32:
        add("mean_rounded", "the gradients at the mean rounded to the activation dtype",
            diff(_golden(t, mean=mean.to(dt).to(mean.dtype))))
    if N > 1:
        xhat = (x - mean[:, None]) * rstd[:, None]
        g = dy * gamma if gamma is not None else dy
        last = (g * xhat)[:, -1:]
        add("dot_skip_last", "the last column's share of the row sum of g * xhat",
            {"dx": rstd[:, None] * xhat * last / N})
    if gamma is not None:
        add("no_gamma", "the gradients with g = dy (gamma left out)",
            {"dx": _golden(t, gamma=None)["dx"] - base["dx"]})
        rows = torch.arange(M, device=x.device)
        full = M // ROW_BLOCK * ROW_BLOCK
        if full < M:
            tail = _golden(t, dy=dy * (rows >= full)[:, None])
            add("row_block_tail", f"the rows past the last multiple of {ROW_BLOCK}",
                {"dgamma": tail["dgamma"], "dbeta": tail["dbeta"]})
        first = _golden(t, dy=dy * (rows == 0)[:, None])
        add("first_row", "row 0's contribution",
            {"dgamma": first["dgamma"], "dbeta": first["dbeta"]})
        # other row sets a block loop loses: its first block, the last row
        if M > 1:
            for name, doc, keep in (
                    ("rows_first_block", f"the first {ROW_BLOCK} rows' contribution",
                     rows < ROW_BLOCK),
                    ("rows_last", "the last row's contribution", rows == M - 1)):
                part = _golden(t, dy=dy * keep[:, None])
                add(name, doc, {"dgamma": part["dgamma"], "dbeta": part["dbeta"]})
    return found


# ---------------------------------------------------------------- causes and rules

def _exact(e: Evidence, family: str, coef: float, outputs=("dx", "dgamma", "dbeta")):
    return any(e.explains(o, family, coef) for o in outputs if o in e.wrong)


def _any_exact(e: Evidence) -> bool:
    return any(_exact(e, f, c) for f, c in (
        ("mean_twice", 1.0), ("mean_rounded", 1.0), ("dot_skip_last", 1.0),
        ("no_gamma", 1.0), ("row_block_tail", -1.0), ("first_row", -1.0),
        ("rows_first_block", -1.0), ("rows_last", -1.0)))


C = Cause
CAUSES = (
    CauseSpec(C.ROW_BLOCK_TAIL, "dgamma/dbeta miss the rows of the last, partial row block",
              f"the block loop of the column sums must cover the rows past the last "
              f"multiple of {ROW_BLOCK} (a partial block)",
              requires=lambda f: f["affine"] and f["row_remainder"]),
    CauseSpec(C.STATS_DTYPE, "saved mean read in the activation dtype",
              "mean and rstd are saved in fp32: load them as float, not as the input type",
              requires=lambda f: f["low_precision"]),
    CauseSpec(C.ROW_SUM_SHORT, "a row sum of dx runs over N-1 columns",
              "the bounds of the row reductions (sum g, sum g * xhat): < N, every column",
              requires=lambda f: f["hidden"] > 1),
    CauseSpec(C.ACCUMULATOR_DTYPE, "dgamma/dbeta accumulated in 16 bits",
              "the column-sum accumulators must be fp32 whatever the activation dtype",
              requires=lambda f: f["affine"] and f["low_precision"]),
    CauseSpec(C.ROW_STRIDE, "row stride wrong (rows read at a padded stride)",
              "the row stride is N, not N rounded up to the vector width",
              requires=lambda f: f["partial_vector"] and f["multi_row"]),
    CauseSpec(C.DBETA_ROWS, "dbeta summed over the wrong rows",
              "dbeta = sum over every row of dy: the row loop's start and bounds",
              requires=lambda f: f["affine"]),
    CauseSpec(C.MEAN_TWICE, "the mean subtracted twice", "xhat = (x - mean) * rstd, once"),
    CauseSpec(C.DX_GAMMA, "dx ignores gamma", "dx needs g = dy * gamma, not dy",
              requires=lambda f: f["affine"]),
    CauseSpec(C.COLUMN_TAIL, f"the partial vector of {VECTOR} columns mishandled",
              "the tail of a row past its last full vector needs the same formula, "
              "element by element", requires=lambda f: f["partial_vector"]),
    CauseSpec(C.ROWS_LOST, "dgamma/dbeta miss some rows' contributions",
              "the row loop of the column sums: its start, its bound and its step",
              requires=lambda f: f["affine"]),
    CauseSpec(C.RAW_X_SUMS, "row sums over the raw x cancel on large means (two-sum form)",
              "sum g * xhat over centred values, not rstd (sum(g x) - mean sum(g)): those "
              "two sums cancel when |mean| >> std", requires=lambda f: f["large_mean"]),
) + generic_causes(
    tile_offset=lambda f: f["affine"] and f["multi_tile"],
    last_index=lambda f: f["multi_row"] or f["hidden"] > 1,
    remainder=lambda f: f["partial_vector"] or f["row_remainder"],
    stride=lambda f: f["multi_row"],
    precision=lambda f: f["low_precision"])

# ---------------------------------------------------------------- checked hypotheses

def _golden_terms(p: Mapping, t: Mapping, attrs: Mapping) -> dict:
    return golden.terms(t["x"], t["dy"], t["mean"], t["rstd"], gamma=t["gamma"])


def _perturbed(p: Mapping, t: Mapping, attrs: Mapping, base: Mapping) -> dict:
    """The outputs under stories the golden's inputs cannot tell (from its formulas)."""
    x, dy, gamma, mean, rstd = t["x"], t["dy"], t["gamma"], t["mean"], t["rstd"]
    N = x.shape[-1]
    r = rstd[:, None]
    xhat = (x - mean[:, None]) * r
    g = dy * gamma if gamma is not None else dy
    found = {"rstd_missing": {"dx": base["dx"] / r}}
    if p["eps"] != DEFAULT_EPS:
        mean_d, rstd_d = golden.statistics(x, DEFAULT_EPS)
        found["stats_default_eps"] = _golden(t, mean=mean_d, rstd=rstd_d)
    if N > 1:
        found["means_n_minus_1"] = {"dx": r * (g - g.sum(-1, keepdim=True) / (N - 1) - xhat * (
            g * xhat).sum(-1, keepdim=True) / (N - 1))}
    if x.shape[0] > 1:  # a row reduction taken over the rows (per column) instead
        found["mean_g_over_rows"] = {"dx": r * (g - g.mean(0, keepdim=True) - xhat * (
            g * xhat).mean(-1, keepdim=True))}
        found["dot_over_rows"] = {"dx": r * (g - g.mean(-1, keepdim=True) - xhat * (
            g * xhat).mean(0, keepdim=True))}
    if gamma is not None:
        # g = dy * gamma where dy belongs: in dx's g (gamma squared), in dgamma and dbeta
        twice = _golden(t, dy=dy * gamma)
        found["gamma_twice"] = {"dx": twice["dx"], "dgamma": twice["dgamma"],
                                "dbeta": twice["dbeta"]}
        found["dgamma_raw_x"] = {"dgamma": (dy * x).sum(0)}
    return found


CHECKED = Hypotheses(
    op="layer_norm",
    terms={"g": "rstd * g (g = dy * gamma)", "mean_g": "rstd * mean(g)",
           "xhat_dot": "rstd * xhat * mean(g * xhat)", "dy_xhat": "sum over rows of dy * xhat",
           "dy": "sum over rows of dy"},
    golden_terms=_golden_terms,
    attributes={"rstd_missing": "without the factor rstd in dx",
                "means_n_minus_1": "with the row means over N - 1 columns",
                "mean_g_over_rows": "with mean(g) taken over the rows (per column)",
                "dot_over_rows": "with mean(g * xhat) taken over the rows (per column)",
                "gamma_twice": "with gamma applied twice (dy * gamma where dy belongs)",
                "dgamma_raw_x": "with dgamma summed over dy * x, not dy * xhat",
                "stats_default_eps": "with mean and rstd recomputed from x with eps = 1e-5 "
                                     "(PyTorch's default), not the saved ones"},
    perturbed=_perturbed)
CAUSES += CHECKED.causes

# Order: the exact term fits first, then the checked hypotheses, then the positions (the
# period search) and spread, each only where the ones before name nothing.
EXACT_RULES = (
    Rule(C.DBETA_ROWS, lambda e: e.only("dbeta") and e.explains("dbeta", "first_row", -1.0)),
    Rule(C.ROW_BLOCK_TAIL, lambda e: e.only("dgamma", "dbeta")
         and _exact(e, "row_block_tail", -1.0, ("dgamma", "dbeta"))),
    Rule(C.ROWS_LOST, lambda e: e.only("dgamma", "dbeta")
         and not _exact(e, "row_block_tail", -1.0, ("dgamma", "dbeta"))
         and not (e.only("dbeta") and e.explains("dbeta", "first_row", -1.0))
         and any(_exact(e, f, -1.0, ("dgamma", "dbeta"))
                 for f in ("first_row", "rows_first_block", "rows_last"))),
    Rule(C.MEAN_TWICE, lambda e: _exact(e, "mean_twice", 1.0)),
    Rule(C.STATS_DTYPE, lambda e: e.f("low_precision") and _exact(e, "mean_rounded", 1.0)),
    Rule(C.ROW_SUM_SHORT, lambda e: e.explains("dx", "dot_skip_last", 1.0)),
    Rule(C.DX_GAMMA, lambda e: e.f("affine") and e.explains("dx", "no_gamma", 1.0)),
)
POSITIONAL_RULES = (
    Rule(C.COLUMN_TAIL, along_axis("dx", "column", lambda p: p.past_multiple_of(VECTOR))),
    Rule(C.ROW_STRIDE, along_axis("dx", "row", lambda p: p.all_but_first)),
    # rounding stories: finite errors only (an unwritten or NaN output is another bug)
    Rule(C.ACCUMULATOR_DTYPE, lambda e: e.f("low_precision") and e.only("dgamma", "dbeta")
         and not _any_exact(e) and any(e.finite(o) and e.spread(o)
                                       for o in ("dgamma", "dbeta"))),
    # cancellation leaves a row-wise error times xhat: no column pattern, no exact term
    Rule(C.RAW_X_SUMS, lambda e: e.f("large_mean") and e.finite("dx")
         and not _any_exact(e) and e.along("dx", "column") is None),
    precision_rule("low_precision"),
) + GENERIC_RULES
RULES = ordered(EXACT_RULES, CHECKED.rules, POSITIONAL_RULES)

SPEC = DiagnosisSpec(causes=CAUSES, rules=RULES, features=FEATURES,
                     case_features=case_features, regions=regions, terms=terms,
                     axes=AXES, periods=PERIODS, shapes=shapes, hypotheses=CHECKED)
