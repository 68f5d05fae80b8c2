"""What the softmax op's axes and features mean to the failure diagnosis.

dx has the axes (row, column). The period search of `suite/diagnosis/` finds where
along them the wrong elements sit (one row, every row but the first, rows at fixed
offsets of each group, the columns past the last vector, every column tile but the
first); this module adds the reference terms, the case features, the causes and the rules
from evidence to cause.

Terms come from the float64 golden, which is linear in the dropout-backward gradient
g = dy * mask * scale: the golden itself (any constant factor), times (scale - 1) (the
scale applied twice) or times (1/scale - 1) (the scale missing), the golden with the mask
inverted, and the parts of the row dot sum(g * y) that a bug drops or adds (its last
column; the dropped elements, when the mask is left out of the dot). Each says "error =
1 x term" when its hypothesis is the bug.

The causes and the kernel sizes they are stated in (VECTOR, COL_TILE, ROW_GROUP) are
in ops/softmax_causes.py, shared with the mutants that plant them.
"""

from __future__ import annotations

from typing import Mapping

import torch

from bwd_suite.golden import softmax as golden
from bwd_suite.ops.softmax_causes import COL_TILE, ROW_GROUP, VECTOR, Cause
from bwd_suite.suite.diagnosis import (COEF_TOL, EXACT_RESIDUAL, GENERIC_RULES, CauseSpec,
                                       DiagnosisSpec, Evidence, Feature, Hypotheses, Rule, Term,
                                       along_axis, generic_causes, ordered,
                                       precision_rule)

# ---------------------------------------------------------------- case features

def case_features(p: Mapping) -> dict:
    R, N = p["rows"], p["length"]
    dropout = bool(p["dropout"])
    return {
        "dropout": dropout,
        "scaled": dropout and p["p"] > 0,
        "dropped": dropout and (p["p"] > 0 and p["mask"] != "all_kept"
                                or p["mask"] == "all_dropped_rows"),
        "low_precision": p["dtype"] != "float32",
        "partial_vector": N % VECTOR != 0,
        "multi_row": R > 1,
        "multi_tile": N > COL_TILE,
        "saturated": p["logit_scale"] >= 10,
        "length": N,
        "rows": R,
    }


FEATURES = (
    Feature("dropout", "with dropout"),
    Feature("scaled", "with dropout and p > 0 (a scale other than 1)",
            implies=("dropout",)),
    Feature("dropped", "with dropped elements", implies=("dropout",)),
    Feature("low_precision", "with 16-bit activations"),
    Feature("partial_vector", f"when the length is not a multiple of {VECTOR}"),
    Feature("multi_row", "with more than one row"),
    Feature("multi_tile", f"with rows longer than {COL_TILE}"),
    Feature("saturated", "with near one-hot y (logit scale >= 10)"),
    Feature("length", "the row length", numeric=True),
    Feature("rows", "the number of rows", numeric=True),
)

AXES = {"dx": ("row", "column")}
PERIODS = {"row": (ROW_GROUP,), "column": (VECTOR, COL_TILE)}


def shapes(p: Mapping) -> dict:
    return {"dx": (p["rows"], p["length"])}


def regions(p: Mapping, t: Mapping, output: str, shape: tuple) -> list:
    """No fixed regions: the period search along rows and columns finds them."""
    return []


# ---------------------------------------------------------------- terms

def terms(p: Mapping, t: Mapping, attrs: Mapping, ev: Evidence) -> dict:
    """Every term of dx when it is wrong (each is one cheap golden evaluation)."""
    if "dx" not in ev.wrong:
        return {}
    y, dy, mask, scale = t["y"], t["dy"], t["mask"], attrs["scale"]
    base = golden.backward(y, dy, mask=mask, scale=scale)["dx"]
    # dx itself: a constant factor anywhere (a wrong scale, temperature or 1/(1-p))
    found = [Term("dx_scaled", "the gradient itself", base)]
    g = golden.dropout_backward(dy, mask, scale)
    found.append(Term("dot_skip_last", "the last column's share of the row dot",
                      y * (g * y)[:, -1:]))
    if mask is not None:
        if scale != 1:
            found.append(Term("scale_twice", "the gradient times (scale - 1)",
                              (scale - 1) * base))
            found.append(Term("scale_missing", "the gradient times (1/scale - 1)",
                              (1 / scale - 1) * base))
        dropped = (~mask).to(y.dtype)
        found.append(Term("dot_mask", "the dropped elements' share of the row dot",
                          -y * (dy * dropped * scale * y).sum(-1, keepdim=True)))
        found.append(Term("mask_inverted", "the gradient with the keep mask inverted",
                          golden.backward(y, dy, mask=~mask, scale=scale)["dx"] - base))
    return {"dx": found}


# ---------------------------------------------------------------- causes and rules

def _scaled(e: Evidence) -> bool:
    """error = c x dx for some c (not ~0): exactly, over the whole output."""
    return e.finite("dx") and any(abs(t.coef) > COEF_TOL and t.residual <= EXACT_RESIDUAL
                                  for t in e.fit("dx", "dx_scaled"))


C = Cause
CAUSES = (
    CauseSpec(C.SCALE_TWICE, "dropout scale applied twice",
              "g = dy * mask * scale once: the scale belongs to the dropout backward, not "
              "again in the softmax part", requires=lambda f: f["scaled"]),
    CauseSpec(C.SCALE_MISSING, "dropout scale 1/(1-p) missing",
              "g = dy * mask * scale: the scale is part of the dropout backward",
              requires=lambda f: f["scaled"]),
    CauseSpec(C.DOT_SHORT, "the row dot runs over N-1 columns",
              "the bound of the dot sum(g * y): < N, every column"),
    CauseSpec(C.DOT_MASK, "the keep mask left out of the row dot",
              "the dot is sum(g * y) with the masked, scaled g, not sum(dy * scale * y)",
              requires=lambda f: f["dropped"]),
    CauseSpec(C.MASK_INVERTED, "the keep mask read inverted",
              "mask is True where the element is kept", requires=lambda f: f["dropout"]),
    CauseSpec(C.ROW_STRIDE, "row stride wrong (rows read at a padded stride)",
              "the row stride is N, not N rounded up to the vector width",
              requires=lambda f: f["partial_vector"] and f["multi_row"]),
    CauseSpec(C.SCALED, "dx off by a constant factor (a scale applied wrong)",
              "every constant factor of dx: the dropout scale 1/(1-p) (not 1-p, not p), a "
              "temperature or a 1/N"),
    CauseSpec(C.COLUMN_TAIL, f"the partial vector of {VECTOR} columns mishandled",
              "the tail of a row past its last full vector needs the dot as well",
              requires=lambda f: f["partial_vector"]),
) + generic_causes(
    tile_offset=lambda f: f["multi_tile"],
    tile_position=lambda f: f["multi_row"],
    last_index=lambda f: f["multi_row"] or f["length"] > 1,
    remainder=lambda f: f["partial_vector"],
    stride=lambda f: f["multi_row"],
    precision=lambda f: f["low_precision"])

# ---------------------------------------------------------------- checked hypotheses

def _golden_terms(p: Mapping, t: Mapping, attrs: Mapping) -> dict:
    return golden.terms(t["y"], t["dy"], mask=t["mask"], scale=attrs["scale"])


def _perturbed(p: Mapping, t: Mapping, attrs: Mapping, base: Mapping) -> dict:
    """dx with the keep mask ignored (the scale kept), with the row dot taken over the
    rows (per column) instead, and with the mask and scale applied to y instead of dy
    (y taken for the dropout's output: the softmax backward of y * mask * scale at dy)."""
    y, mask, scale = t["y"], t["mask"], attrs["scale"]
    found = {}
    if y.shape[0] > 1:
        g = golden.dropout_backward(t["dy"], mask, scale)
        found["dot_over_rows"] = {"dx": y * (g - (g * y).sum(0, keepdim=True))}
    if mask is not None:
        found["mask_ignored"] = golden.backward(y, t["dy"], mask=torch.ones_like(mask),
                                                scale=scale)
        found["dropout_on_y"] = golden.backward(y * mask.to(y.dtype) * scale, t["dy"])
    return found


CHECKED = Hypotheses(
    op="softmax", terms={"y_g": "y * g (g = dy * mask * scale)",
                         "rowsum": "y * rowsum(y * g)"},
    golden_terms=_golden_terms,
    attributes={"mask_ignored": "with the keep mask ignored (every element kept, the "
                                "scale applied)",
                "dot_over_rows": "with the row dot sum(g * y) taken over the rows (per "
                                 "column)",
                "dropout_on_y": "with the keep mask and scale applied to y instead of dy "
                                "(y taken for the dropout's output)"},
    perturbed=_perturbed)
CAUSES += CHECKED.causes

# Order: the exact term fits first, then the checked hypotheses, then the positions (the
# period search), each only where the ones before name nothing.
EXACT_RULES = (
    Rule(C.SCALE_TWICE, lambda e: e.explains("dx", "scale_twice", 1.0)),
    Rule(C.SCALE_MISSING, lambda e: e.explains("dx", "scale_missing", 1.0)),
    Rule(C.MASK_INVERTED, lambda e: e.explains("dx", "mask_inverted", 1.0)),
    Rule(C.DOT_MASK, lambda e: e.explains("dx", "dot_mask", 1.0)),
    Rule(C.DOT_SHORT, lambda e: e.explains("dx", "dot_skip_last", 1.0)),
    Rule(C.SCALED, lambda e: _scaled(e) and not e.explains("dx", "scale_twice", 1.0)
         and not e.explains("dx", "scale_missing", 1.0)),
)
POSITIONAL_RULES = (
    Rule(C.COLUMN_TAIL, along_axis("dx", "column", lambda p: p.past_multiple_of(VECTOR))),
    Rule(C.ROW_STRIDE, along_axis("dx", "row", lambda p: p.all_but_first)),
    precision_rule("low_precision"),
) + GENERIC_RULES
RULES = ordered(EXACT_RULES, CHECKED.rules, POSITIONAL_RULES)

SPEC = DiagnosisSpec(causes=CAUSES, rules=RULES, features=FEATURES,
                     case_features=case_features, regions=regions, terms=terms,
                     axes=AXES, periods=PERIODS, shapes=shapes, hypotheses=CHECKED)
