"""What the cross_entropy op's outputs and features mean to the failure diagnosis.

dlogits has the axes (token, class), loss (token,) for reduction none and none for mean
and sum. No fixed regions: the period search of `suite/diagnosis/` finds where along
the tokens and classes the wrong elements sit. This module adds the reference terms, the
case features, the causes and the rules.

Terms come from a float64 evaluation of the op (`_trainer`: the formulas of
`golden.cross_entropy` per implementation call, inside the trainer's loop of
`ops.cross_entropy.invoke` for accumulation) under one changed hypothesis each, minus the
same evaluation without it: the mean over every token instead of the non-ignored ones,
the labels not shifted, the flat batch shifted across sequence boundaries, ignored tokens
given their softmax p as gradient, the smoothing spread over V - 1 classes, the z-loss
gradient left out, the softcap derivative left out, the lse rounded to the logits dtype.
Each says "error = +1.00 x term" when its hypothesis is the bug. NaN where a mean is over
zero tokens has no term (no fit of NaN says anything): the rule reads the non-finite
outputs and the case feature.

Which outputs are wrong is evidence too: the z-loss gradient, the softcap derivative
and a gradient on ignored tokens leave the loss right.
"""

from __future__ import annotations

from typing import Mapping

import torch

from bwd_suite.golden import cross_entropy as golden
from bwd_suite.ops.cross_entropy_causes import Cause
from bwd_suite.ops.cross_entropy_labels import aligned, constant_target, scored
from bwd_suite.suite.diagnosis import (GENERIC_RULES, CauseSpec, DiagnosisSpec, Evidence, Feature,
                                       Hypotheses, Rule, Term, generic_causes, ordered,
                                       precision_rule)
from bwd_suite.suite.inputs import DTYPES

OUTPUTS = ("loss", "dlogits")
# the terms cost about ten float64 evaluations of the op: left out beyond this size
MAX_TERM_ELEMENTS = 1 << 24


# ---------------------------------------------------------------- case features

def _calls(p: Mapping) -> tuple:
    """(reduction each implementation call runs, sequences per call): the trainer's loop
    turns a global-token mean over micro-batches into sums."""
    k = p["accumulation"]
    red = p["reduction"]
    if red == "mean" and k > 1 and p["normalize"] == "global_tokens":
        red = "sum"
    return red, p["batch"] // k


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
    return {
        "low_precision": p["dtype"] != "float32",
        "shift": bool(p["shift"]),
        "shift_multi_seq": bool(p["shift"]) and per_call >= 2,
        "ignored": ignored,
        "mean_ignored": mean_ignored,
        "empty_mean": red == "mean" and any(not bool(c.any()) for c in calls),
        "smoothing": p["label_smoothing"] > 0 and V > 1,
        "z_loss": p["z_loss"] > 0,
        "softcap": p["softcap"] > 0,
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
    Feature("accumulation", "with gradient accumulation"),
    Feature("vocab", "the vocabulary size", numeric=True),
    Feature("logit_scale", "the logit scale", numeric=True),
)

AXES = {"dlogits": ("token", "class"), "loss": ("token",)}


def shapes(p: Mapping) -> dict:
    N = p["batch"] * p["seq"]
    return {"dlogits": (N, p["vocab"]), "loss": (N,) if p["reduction"] == "none" else ()}


def regions(p: Mapping, t: Mapping, output: str, shape: tuple) -> list:
    """No fixed regions: the period search along tokens and classes finds them."""
    return []


# ---------------------------------------------------------------- terms

def _align(targets, shift, seq_len, ignore_index, hyp):
    out = torch.full_like(targets, ignore_index)
    if not shift or hyp == "shift_missing":
        return targets.clone()
    if hyp == "shift_crosses":
        out[:-1] = targets[1:]
        return out
    t, o = targets.reshape(-1, seq_len), out.reshape(-1, seq_len)
    o[:, :-1] = t[:, 1:]
    return out


def _call(x, targets, g, a: Mapping, hyp, dtype):
    """One implementation call in float64 under hypothesis `hyp` (None: the op)."""
    N, V = x.shape
    y = _align(targets, a["shift"], a["seq_len"], a["ignore_index"], hyp)
    valid = y != a["ignore_index"]
    c, eps, z = a["softcap"], a["label_smoothing"], a["z_loss"]
    xc = c * torch.tanh(x / c) if c else x
    m = xc.max(dim=1, keepdim=True).values if V else xc.new_zeros(N, 1)
    lse = m.squeeze(1) + (xc - m).exp().sum(dim=1).log()
    if hyp == "lse_rounded":
        lse = lse.to(dtype).to(torch.float64)
    p = (xc - lse[:, None]).exp()
    onehot = torch.zeros_like(x).scatter_(1, torch.where(valid, y, 0)[:, None], 1.0)
    smooth = (1 - onehot) / (V - 1) if hyp == "smoothing_v_minus_1" and V > 1 else \
        torch.full_like(x, 1.0 / V)
    loss = (1 - eps) * (lse - (xc * onehot).sum(1)) + eps * (lse - (smooth * xc).sum(1)) + \
        z * lse * lse
    zg = 0.0 if hyp == "z_loss_grad_missing" else 2 * z * lse[:, None]
    grad = p * (1 + zg) - (1 - eps) * onehot - eps * smooth
    grad = torch.where(valid[:, None], grad, p if hyp == "ignored_grad" else 0.0)
    if c and hyp != "softcap_derivative_missing":
        grad = grad / torch.cosh(x / c).square()
    loss = torch.where(valid, loss, 0.0)
    if a["reduction"] == "none":
        return loss, g[:, None] * grad
    w = 1.0
    if a["reduction"] == "mean":
        w = 1.0 / (N if hyp == "mean_all_tokens" else max(int(valid.sum()), 1))
    return (w * loss).sum(), (g * w) * grad


def _trainer(t: Mapping, a: Mapping, p: Mapping, hyp=None) -> dict:
    """{loss, dlogits} of the case in float64 under `hyp`, the trainer's loop of
    `ops.cross_entropy.invoke` around the calls."""
    x, y, g = t["logits"], t["targets"], t["grad_loss"]
    dtype = DTYPES[p["dtype"]]
    k = p["accumulation"]
    if k == 1:
        loss, d = _call(x, y, g, a, hyp, dtype)
        return {"loss": loss, "dlogits": d}
    red = a["reduction"]
    if red == "mean" and p["normalize"] == "global_tokens":
        scored = aligned(y, a["shift"], a["seq_len"], a["ignore_index"])
        div = max(int((scored != a["ignore_index"]).sum()), 1)
        ca, cg = dict(a, reduction="sum"), g / div
    elif red == "mean":
        ca, cg, div = a, g / k, k
    else:
        ca, cg, div = a, g, 1
    rows = x.shape[0] // k
    losses, grads = [], []
    for i in range(k):
        s = slice(i * rows, (i + 1) * rows)
        loss, d = _call(x[s], y[s], cg[s] if red == "none" else cg, ca, hyp, dtype)
        losses.append(loss)
        grads.append(d)
    loss = torch.cat(losses) if red == "none" else torch.stack(losses).sum() / div
    return {"loss": loss, "dlogits": torch.cat(grads)}


# (hypothesis, words, applies to the case's attributes and parameters)
HYPOTHESES = (
    ("mean_all_tokens", "the mean over every token, ignored ones included",
     lambda a, p: a["reduction"] == "mean"),
    ("shift_missing", "the loss on labels not shifted", lambda a, p: a["shift"]),
    ("shift_crosses", "the loss on the flat batch shifted across sequences",
     lambda a, p: a["shift"]),
    ("ignored_grad", "the softmax p as the gradient of ignored tokens", lambda a, p: True),
    ("smoothing_v_minus_1", "the smoothing spread over V - 1 classes",
     lambda a, p: a["label_smoothing"] > 0 and p["vocab"] > 1),
    ("z_loss_grad_missing", "dlogits without the z-loss gradient 2 z lse p",
     lambda a, p: a["z_loss"] > 0),
    ("softcap_derivative_missing", "dlogits without the softcap derivative 1 - tanh^2",
     lambda a, p: a["softcap"] > 0),
    # fp32 too: at logit scale 100 an fp32 lse leaves p - 1 of near one-hot rows beyond
    # the tolerance (torch's fp32 log-softmax backward keeps those digits)
    ("lse_rounded", "the lse rounded to the logits dtype", lambda a, p: True),
)


def terms(p: Mapping, t: Mapping, attrs: Mapping, ev: Evidence) -> dict:
    """Each applicable hypothesis minus the op, for every wrong (finite) output."""
    wrong = [o for o in OUTPUTS if o in ev.wrong]
    found = {o: [] for o in wrong}
    if not wrong or t["logits"].numel() > MAX_TERM_ELEMENTS:
        return found
    a = {k: v for k, v in attrs.items() if k not in ("accumulation", "normalize")}
    base = _trainer(t, a, p)
    for hyp, doc, applies in HYPOTHESES:
        if not applies(a, p):
            continue
        h = _trainer(t, a, p, hyp)
        for o in wrong:
            found[o].append(Term(hyp, doc, h[o] - base[o]))
    return found


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
    Rule(C.SHIFT_CROSSES, lambda e: _fits(e, "shift_crosses")),
    Rule(C.SHIFT_MISSING, lambda e: _fits(e, "shift_missing")),
    Rule(C.IGNORED_GRADIENT, lambda e: _fits(e, "ignored_grad", loss_right=True)),
    Rule(C.Z_LOSS_GRADIENT, lambda e: _fits(e, "z_loss_grad_missing", loss_right=True)),
    Rule(C.SOFTCAP_DERIVATIVE,
         lambda e: _fits(e, "softcap_derivative_missing", loss_right=True)),
    Rule(C.SMOOTHING_V_MINUS_1, lambda e: _fits(e, "smoothing_v_minus_1")),
    Rule(C.MEAN_COUNTS_IGNORED, lambda e: _fits(e, "mean_all_tokens")),
    Rule(C.LSE_PRECISION, lambda e: _fits(e, "lse_rounded")),
)
RULES = ordered(RULES, CHECKED.rules, (precision_rule("low_precision"),) + GENERIC_RULES)

SPEC = DiagnosisSpec(causes=CAUSES, rules=RULES, features=FEATURES,
                     case_features=case_features, regions=regions, terms=terms, axes=AXES,
                     shapes=shapes, hypotheses=CHECKED)
