"""What the cross_entropy op's outputs and features mean to the failure diagnosis.

dlogits has the axes (token, class), loss (token,) for reduction none and none for mean
and sum. One region: the rows whose lse lies beyond exp's fp32 range, where an lse
without the row max overflows or underflows; otherwise the period search of
`suite/diagnosis/` finds where along the tokens and classes the wrong elements sit. This
module adds the reference terms, the case features, the causes and the rules.

Terms come from a float64 evaluation of the op (ops/cross_entropy_stories.py: the
formulas of `golden.cross_entropy` per implementation call, inside the trainer's loop of
`ops.cross_entropy.invoke` for accumulation) under one changed hypothesis each, minus the
same evaluation without it: the mean over every token instead of the non-ignored ones,
the mean's count taken on the labels before the shift, the labels not shifted, the flat
batch shifted across sequence boundaries, the labels shifted on a (seq_len, batch) view,
ignored tokens given their softmax p as gradient, labels tested against -100 instead of
the ignore_index attribute, the smoothing spread over V - 1 classes, the z-loss gradient
left out, the softcap derivative left out, the softcap's factor c left out, the upstream
gradient of reduction none read as its first element, the lse rounded to the logits
dtype. Each says "error = +1.00 x term" when its hypothesis is the bug. Non-finite
outputs have no term (no fit of NaN says anything): NaN where a mean is over zero tokens,
and inf or NaN only in the rows beyond exp's range (an lse without the max), are read
from the non-finite outputs with the case feature or the region.

Which outputs are wrong is evidence too: the z-loss gradient, the softcap derivative,
a gradient on ignored tokens and the upstream gradient of reduction none leave the loss
right.
"""

from __future__ import annotations

import math
from typing import Mapping

import torch

from bwd_suite.golden import cross_entropy as golden
from bwd_suite.ops.cross_entropy_causes import Cause
from bwd_suite.ops.cross_entropy_labels import constant_target, scored
from bwd_suite.ops.cross_entropy_stories import (DEFAULT_IGNORE_INDEX, MAX_TERM_ELEMENTS,
                                                 OUTPUTS, terms)
from bwd_suite.suite.diagnosis import (GENERIC_RULES, CauseSpec, DiagnosisSpec, Evidence, Feature,
                                       Hypotheses, Region, Rule, generic_causes, ordered,
                                       precision_rule)

# ln of fp32's smallest subnormal and of its largest value: sum_j exp(x_j) underflows to 0
# or overflows to inf outside, without the row max subtracted first
EXP_RANGE = (-103.28, 88.72)


# ---------------------------------------------------------------- case features

def _calls(p: Mapping) -> tuple:
    """(reduction each implementation call runs, sequences per call): the trainer's loop
    turns a global-token mean over micro-batches into sums."""
    k = p["accumulation"]
    red = p["reduction"]
    if red == "mean" and k > 1 and p["normalize"] == "global_tokens":
        red = "sum"
    return red, p["batch"] // k


def _largest_lse(p: Mapping) -> float:
    """About the largest |lse| of a row the case's logits reach (6 standard deviations;
    an lse below -103 is beyond 88 in size too)."""
    big = abs(p["logit_mean"]) + 6 * p["logit_scale"]
    if p["softcap"]:
        big = min(big, p["softcap"])
    return big + math.log(max(p["vocab"], 1))


def case_features(p: Mapping) -> dict:
    keep = scored(p)
    V = p["vocab"]
    # an ignore_index inside the vocabulary may be drawn among the random ids
    drawn = constant_target(p) is None and 0 <= p["ignore_index"] < V
    ignored = drawn or not bool(keep.all())
    red, per_call = _calls(p)
    k = p["accumulation"]
    calls = keep.reshape(k, -1)
    # some call's mean has ignored tokens and at least one scored one
    mean_ignored = red == "mean" and (drawn and bool(keep.any()) or any(
        bool(c.any()) and not bool(c.all()) for c in calls))
    cap = p["softcap"]
    return {
        "low_precision": p["dtype"] != "float32",
        "shift": bool(p["shift"]),
        "shift_multi_seq": bool(p["shift"]) and per_call >= 2,
        "ignored": ignored,
        "mean_ignored": mean_ignored,
        "empty_mean": red == "mean" and any(not bool(c.any()) for c in calls),
        "smoothing": p["label_smoothing"] > 0 and V > 1,
        "z_loss": p["z_loss"] > 0,
        "softcap": cap > 0,
        "softcap_not_one": cap > 0 and cap != 1,
        "ignore_index_set": ignored and p["ignore_index"] != DEFAULT_IGNORE_INDEX,
        "none_multi": red == "none" and p["seq"] * per_call >= 2,
        "far_logits": _largest_lse(p) > EXP_RANGE[1],
        "accumulation": k > 1,
        "vocab": V,
        "logit_scale": p["logit_scale"],
    }


FEATURES = (
    Feature("low_precision", "with 16-bit logits"),
    Feature("shift", "with the label shift"),
    Feature("shift_multi_seq", "with the shift over two or more sequences per call",
            implies=("shift",)),
    Feature("ignored", "with ignored tokens"),
    Feature("mean_ignored", "with a mean over a batch with ignored tokens",
            implies=("ignored",)),
    Feature("empty_mean", "with a mean over zero tokens", implies=("ignored",)),
    Feature("smoothing", "with label smoothing"),
    Feature("z_loss", "with z-loss"),
    Feature("softcap", "with a softcap"),
    Feature("softcap_not_one", "with a softcap other than 1", implies=("softcap",)),
    Feature("ignore_index_set", "with labels ignored at an ignore_index other than -100",
            implies=("ignored",)),
    Feature("none_multi", "with reduction none over two or more tokens per call"),
    Feature("far_logits", "with logits beyond exp's fp32 range (an lse above 88 or below "
            "-103)"),
    Feature("accumulation", "with gradient accumulation"),
    Feature("vocab", "the vocabulary size", numeric=True),
    Feature("logit_scale", "the logit scale", numeric=True),
)

AXES = {"dlogits": ("token", "class"), "loss": ("token",)}


def shapes(p: Mapping) -> dict:
    N = p["batch"] * p["seq"]
    return {"dlogits": (N, p["vocab"]), "loss": (N,) if p["reduction"] == "none" else ()}


def regions(p: Mapping, t: Mapping, output: str, shape: tuple) -> list:
    """The rows whose lse lies beyond exp's fp32 range (`EXP_RANGE`): there a sum of exp
    taken without the row max overflows to inf or underflows to 0 (in float64 too, past
    709 or -745: a subset). Else no fixed regions: the period search along tokens and
    classes finds them."""
    x = t["logits"]
    if output not in AXES or x.numel() > MAX_TERM_ELEMENTS or not x.shape[1]:
        return []
    c = p["softcap"]
    xc = c * torch.tanh(x / c) if c else x
    lse = torch.logsumexp(xc, dim=1)
    far = (lse > EXP_RANGE[1]) | (lse < EXP_RANGE[0])
    if not bool(far.any()):
        return []
    mask = far[:, None] if output == "dlogits" else far if len(shape) else far.any()
    return [Region("exp_range", "in the rows whose lse lies beyond exp's fp32 range", mask)]


# ---------------------------------------------------------------- causes and rules

def _fits(e: Evidence, family: str, loss_right: bool = False) -> bool:
    """error = +1 x the term in dlogits (or in the loss, when only the loss is wrong);
    with `loss_right`, the hypothesis leaves the loss alone and it is right."""
    if loss_right and "loss" in e.wrong:
        return False
    if "dlogits" in e.wrong:
        return e.finite("dlogits") and e.explains("dlogits", family, 1.0)
    return e.finite("loss") and e.explains("loss", family, 1.0)


def _nan_on_empty_mean(e: Evidence) -> bool:
    return e.f("empty_mean") and any(o in e.nonfinite for o in OUTPUTS)


def _nonfinite_beyond_exp(e: Evidence) -> bool:
    """Some output inf or NaN, and every wrong output wrong only in the rows whose lse
    lies beyond exp's range: what a sum of exp without the max subtracted gives."""
    return bool(e.nonfinite) and all(e.at(o, "exp_range") is not None for o in e.wrong)


C = Cause
CAUSES = (
    CauseSpec(C.MEAN_COUNTS_IGNORED, "loss counts ignored tokens (the mean over all N)",
              "reduction mean divides by the count of non-ignored tokens, not by N",
              requires=lambda f: f["mean_ignored"]),
    CauseSpec(C.SHIFT_MISSING, "labels not shifted",
              "with shift, position t is scored against the label of t + 1 "
              "(ops.cross_entropy.aligned)", requires=lambda f: f["shift"]),
    CauseSpec(C.SHIFT_CROSSES, "shift crosses sequences (the flat batch shifted)",
              "shift each sequence of seq_len labels, the last position of each ignored: "
              "never the next sequence's first label",
              requires=lambda f: f["shift_multi_seq"]),
    CauseSpec(C.IGNORED_GRADIENT, "ignored tokens get a gradient",
              "a token whose label is ignore_index has a zero loss and a zero dlogits row",
              requires=lambda f: f["ignored"]),
    CauseSpec(C.SMOOTHING_V_MINUS_1, "smoothing over V-1 classes, not V",
              "label smoothing is eps / V on every class, the target included (PyTorch's)",
              requires=lambda f: f["smoothing"]),
    CauseSpec(C.Z_LOSS_GRADIENT, "z-loss gradient missing",
              "the z-loss z lse^2 adds 2 z lse p to each dlogits row",
              requires=lambda f: f["z_loss"]),
    CauseSpec(C.SOFTCAP_DERIVATIVE, "softcap derivative missing",
              "with a softcap c tanh(x / c), dlogits is multiplied by 1 - tanh^2(x / c)",
              requires=lambda f: f["softcap"]),
    CauseSpec(C.EMPTY_MEAN_NAN, "NaN on an all-ignored mean (0/0)",
              "a mean over zero non-ignored tokens is 0 with a zero gradient: guard the "
              "division by the count", requires=lambda f: f["empty_mean"]),
    CauseSpec(C.LSE_PRECISION, "lse rounded to the logits dtype",
              "accumulate and keep the lse in fp32: p and the loss come from it",
              requires=lambda f: f["low_precision"] or f["logit_scale"] >= 100),
    CauseSpec(C.SOFTCAP_FACTOR, "softcap without its factor c (tanh(x / c) as the capped "
              "logits)", "the capped logits are c tanh(x / c), in the loss and the "
              "gradient; their derivative 1 - tanh^2(x / c) is not divided by c",
              requires=lambda f: f["softcap_not_one"]),
    CauseSpec(C.IGNORE_INDEX_DEFAULT, "labels tested against -100 (PyTorch's default), not "
              "the ignore_index attribute", "the ignored test and the shift's fill use the "
              "case's ignore_index, which may be a class id",
              requires=lambda f: f["ignore_index_set"]),
    CauseSpec(C.MEAN_COUNT_UNSHIFTED, "the mean's token count taken before the label "
              "shift", "with shift, the mean divides by the count of the labels scored "
              "(after the shift), not of the labels as given",
              requires=lambda f: f["shift"] and f["mean_ignored"]),
    CauseSpec(C.NONE_GRAD_FIRST, "the upstream gradient of reduction none read as one "
              "number (its first element for every row)", "with reduction none, row i of "
              "dlogits is scaled by grad_loss[i]", requires=lambda f: f["none_multi"]),
    CauseSpec(C.SHIFT_TIME_MAJOR, "labels shifted along the wrong axis (a (seq_len, "
              "batch) view of the flat labels)", "the flat labels are (batch, seq_len), "
              "sequence-major: shift along seq_len within each sequence",
              requires=lambda f: f["shift_multi_seq"]),
    CauseSpec(C.LSE_OVERFLOW, "lse without the max subtraction (exp overflows or "
              "underflows)", "lse = max + log sum exp(x - max): without the row max, "
              "exp of far logits is inf or 0", requires=lambda f: f["far_logits"]),
) + generic_causes(precision=lambda f: f["low_precision"])

# ---------------------------------------------------------------- checked hypotheses

def _golden_terms(p: Mapping, t: Mapping, attrs: Mapping) -> dict:
    if t["logits"].numel() > MAX_TERM_ELEMENTS:
        return {}
    return golden.terms(t["logits"], t["targets"], t["grad_loss"], **attrs)


def _perturbed(p: Mapping, t: Mapping, attrs: Mapping, base: Mapping) -> dict:
    """The outputs with the other reduction of a single call (a mean taken as a sum, a sum
    as a mean)."""
    red = attrs["reduction"]
    if red == "none" or attrs["accumulation"] > 1 or t["logits"].numel() > MAX_TERM_ELEMENTS:
        return {}
    other = "sum" if red == "mean" else "mean"
    return {f"reduction_{other}": golden.cross_entropy(
        t["logits"], t["targets"], t["grad_loss"], **{**attrs, "reduction": other})}


CHECKED = Hypotheses(
    op="cross_entropy",
    terms={"softmax": "p (the softmax)", "target": "-(1 - eps) at the target class",
           "smoothing": "of the label smoothing (eps / V on every class)",
           "z_loss": "of the z-loss (2 z lse p in dlogits, z lse^2 in the loss)",
           "softcap": "of the softcap derivative (its share, sech^2 - 1)",
           "nll": "(1 - eps) (lse - x_target)"},
    golden_terms=_golden_terms,
    attributes={"reduction_sum": "with a sum where the mean belongs",
                "reduction_mean": "with a mean where the sum belongs"},
    perturbed=_perturbed)
CAUSES += CHECKED.causes

# Order: the non-finite outputs of an empty mean, then the exact term fits (most specific
# first), then the checked hypotheses; the generic period-search causes only when none
# holds.
RULES = (
    Rule(C.EMPTY_MEAN_NAN, _nan_on_empty_mean),
    Rule(C.LSE_OVERFLOW, _nonfinite_beyond_exp),
    Rule(C.SHIFT_CROSSES, lambda e: _fits(e, "shift_crosses")),
    Rule(C.SHIFT_MISSING, lambda e: _fits(e, "shift_missing")),
    Rule(C.SHIFT_TIME_MAJOR, lambda e: _fits(e, "shift_time_major")),
    Rule(C.IGNORED_GRADIENT, lambda e: _fits(e, "ignored_grad", loss_right=True)),
    Rule(C.Z_LOSS_GRADIENT, lambda e: _fits(e, "z_loss_grad_missing", loss_right=True)),
    Rule(C.SOFTCAP_DERIVATIVE,
         lambda e: _fits(e, "softcap_derivative_missing", loss_right=True)),
    Rule(C.SOFTCAP_FACTOR, lambda e: _fits(e, "softcap_without_factor")),
    Rule(C.SMOOTHING_V_MINUS_1, lambda e: _fits(e, "smoothing_v_minus_1")),
    Rule(C.MEAN_COUNTS_IGNORED, lambda e: _fits(e, "mean_all_tokens")),
    Rule(C.MEAN_COUNT_UNSHIFTED, lambda e: _fits(e, "mean_count_unshifted")),
    Rule(C.IGNORE_INDEX_DEFAULT, lambda e: _fits(e, "ignore_index_default")),
    Rule(C.NONE_GRAD_FIRST, lambda e: _fits(e, "none_grad_first", loss_right=True)),
    Rule(C.LSE_PRECISION, lambda e: _fits(e, "lse_rounded")),
)
RULES = ordered(RULES, CHECKED.rules, (precision_rule("low_precision"),) + GENERIC_RULES)

SPEC = DiagnosisSpec(causes=CAUSES, rules=RULES, features=FEATURES,
                     case_features=case_features, regions=regions, terms=terms, axes=AXES,
                     shapes=shapes, hypotheses=CHECKED)
