"""What the adamw op's outputs and features mean to the failure diagnosis.

Every output but found_inf is a list of tensors (the parameter list); suite/diagnosis/
measures a list as one concatenated whole and runs its period search along the list
index ("every tensor but the first"). This module adds the reference terms, the case
features, the causes and the rules.

Terms come from the float64 golden (`golden.adamw`, cheap) under one changed hypothesis
each, minus the golden: the bias corrections left out or taken a step late or early, the
gradients not unscaled, a clip coefficient not capped at 1, each gradient clipped by its
own norm, the clip norm taken before the unscale, amsgrad's max not in the denominator,
tensor i at step count step + i, and (from a float64 step of its own, for what the
golden cannot take as changed inputs) weight decay coupled as L2 or applied after the
update, eps inside the square root, sqrt(v) divided by 1 - b2^t unrooted, maximize
negating the update instead of the gradient and the moments rounded to bf16 each step;
besides, the update itself (a parameter left as it was is -1 x the update). Each says
"error = 1 x term" when its hypothesis is the bug.

Which outputs are wrong is evidence too: the bias corrections, eps, amsgrad's
denominator, the step count and the decay's place touch the parameters only, never the
moments; the decay coupled as L2, the unscale, the clip and maximize reach the moments.
"""

from __future__ import annotations

import math
from typing import Mapping

import torch

from bwd_suite.golden import adamw as golden
from bwd_suite.ops.adamw_causes import Cause
from bwd_suite.ops.adamw_shapes import shapes
from bwd_suite.suite.diagnosis import (GENERIC_RULES, CauseSpec, DiagnosisSpec, Evidence, Feature,
                                       Hypotheses, Rule, Term, generic_causes, ordered,
                                       precision_rule)

MOMENTS = ("exp_avg", "exp_avg_sq")
WEIGHTS = ("params", "master")  # where the update lands (the master, when there is one)
STATE = WEIGHTS + MOMENTS + ("max_exp_avg_sq",)
# a step count past which b^t is 0 for every beta < 1 in float64: no bias correction
NO_CORRECTION = 1 << 62
# the terms cost about a dozen float64 steps, each a Python loop over the list: left out
# beyond these sizes (GPT-2 large's list, the fuzzer's thousands of tensors)
MAX_TERM_TENSORS = 1024
MAX_TERM_ELEMENTS = 1 << 22


# ---------------------------------------------------------------- case features

def _n_tensors(p: Mapping) -> int:
    return len(shapes(p))


def case_features(p: Mapping) -> dict:
    nonfinite = p["grads"] in ("inf_one", "nan_one")
    zero = p["grads"] == "zero"
    # the moments change (not zero gradients on a zero state) and the step runs
    moments_move = not nonfinite and not (zero and p["step"] == 1)
    return {
        "low_precision": p["dtype"] != "float32",
        "master": bool(p["master"]),
        "amsgrad": bool(p["amsgrad"]),
        "amsgrad_max": bool(p["amsgrad"]) and p["step"] > 1,  # the max exceeds v
        "maximize": bool(p["maximize"]),
        "decay": p["weight_decay"] > 0 and not nonfinite,
        "nonfinite": nonfinite,
        "zero_grads": zero,
        "moments_move": moments_move,
        "adam_moves": moments_move and p["lr"] > 0,  # the Adam part of the update is not 0
        "scaled": p["loss_scale"] != 1 and not nonfinite and not zero,
        "clip": p["max_norm"] > 0 and not nonfinite and not zero,
        "multi_tensor": _n_tensors(p) > 1,
        "multi_step": p["steps"] > 1,
        "step": p["step"],
        "tensors": _n_tensors(p),
    }


FEATURES = (
    Feature("low_precision", "with 16-bit parameters"),
    Feature("master", "with fp32 master weights"),
    Feature("amsgrad", "with amsgrad"),
    Feature("amsgrad_max", "with amsgrad past step 1", implies=("amsgrad",)),
    Feature("maximize", "with maximize"),
    Feature("decay", "with weight decay", implies=("not nonfinite",)),
    Feature("nonfinite", "with an inf or NaN gradient"),
    Feature("zero_grads", "with zero gradients"),
    Feature("moments_move", "when the moments change", implies=("not nonfinite",)),
    Feature("adam_moves", "when the Adam update is not zero",
            implies=("moments_move", "not nonfinite")),
    Feature("scaled", "with a loss scale", implies=("not nonfinite", "not zero_grads")),
    Feature("clip", "with clipping", implies=("not nonfinite", "not zero_grads")),
    Feature("multi_tensor", "with more than one tensor"),
    Feature("multi_step", "with several steps per call"),
    Feature("step", "the step count", numeric=True),
    Feature("tensors", "the number of tensors", numeric=True),
)

AXES = {o: ("tensor",) for o in STATE}


def regions(p: Mapping, t: Mapping, output: str, shape: tuple) -> list:
    """No fixed regions: the period search along the list finds the tensors."""
    return []


# ---------------------------------------------------------------- terms

_INPUTS = ("params", "grads", "master", "exp_avg", "exp_avg_sq", "max_exp_avg_sq")


def _golden(t: Mapping, attrs: Mapping, **changed) -> dict:
    a = {**{k: t[k] for k in _INPUTS}, **attrs}
    a.update(changed)
    lists = [a.pop(k) for k in _INPUTS]
    return golden.adamw(*lists, **a)


def _per_tensor_step(t: Mapping, attrs: Mapping) -> dict:
    """The golden with tensor i at step count step + i (the unscale and clip over the
    whole list first)."""
    g, found = golden.unscale_clip(t["grads"], attrs["loss_scale"], attrs["max_norm"])
    one = {**attrs, "loss_scale": 1.0, "max_norm": 0.0}
    out = {}
    for i in range(len(g)):
        pick = {k: None if t[k] is None else [t[k][i]] for k in _INPUTS}
        r = _golden({**pick, "grads": [g[i]]}, {**one, "step": attrs["step"] + i})
        for k, v in r.items():
            if k != "found_inf":
                out.setdefault(k, []).extend(v)
    return out


def _steps_changed(t: Mapping, attrs: Mapping, *, coupled=False, eps_inside=False,
                   moments_bf16=False, decay_without_lr=False, bc1_missing=False,
                   bc2_missing=False, decay_after=False, bc2_unrooted=False,
                   maximize_on_update=False) -> dict:
    """golden.steps_ with weight decay coupled as L2, eps inside the square root, the
    moments rounded to bf16 each step, the decay not times lr, one bias correction left
    out, the decay applied after the update, sqrt(v) divided by 1 - b2^t unrooted, or
    maximize negating the update instead of the gradient: hypotheses its formulas cannot
    take as changed inputs."""
    a = attrs
    f = lambda xs: None if xs is None else [x.clone() for x in xs]  # noqa: E731
    p = f(t["master"]) if t["master"] is not None else f(t["params"])
    m, v = f(t["exp_avg"]), f(t["exp_avg_sq"])
    vmax = f(t["max_exp_avg_sq"]) if a["amsgrad"] else None
    g, found = golden.unscale_clip(t["grads"], a["loss_scale"], a["max_norm"])
    if found:
        return {}
    b1, b2, lr, wd = a["beta1"], a["beta2"], a["lr"], a["weight_decay"]
    for s in range(a["step"], a["step"] + a["steps"]):
        bc1, bc2 = 1 - b1 ** s, 1 - b2 ** s
        bc1, bc2 = (1.0 if bc1_missing else bc1), (1.0 if bc2_missing else bc2)
        for i in range(len(p)):
            gi = -g[i] if a["maximize"] and not maximize_on_update else g[i]
            if coupled:
                gi = gi + wd * p[i]
            elif not decay_after:
                p[i] = p[i] * (1 - (1 if decay_without_lr else lr) * wd)
            m[i] = b1 * m[i] + (1 - b1) * gi
            v[i] = b2 * v[i] + (1 - b2) * gi * gi
            if moments_bf16:
                m[i], v[i] = (x.to(torch.bfloat16).to(x.dtype) for x in (m[i], v[i]))
            if vmax is not None:
                vmax[i] = torch.maximum(vmax[i], v[i])
            vd = vmax[i] if vmax is not None else v[i]
            den = (vd / bc2 + a["eps"]).sqrt() if eps_inside else \
                vd.sqrt() / (bc2 if bc2_unrooted else math.sqrt(bc2)) + a["eps"]
            sign = -1.0 if maximize_on_update and a["maximize"] else 1.0
            p[i] = p[i] - sign * (lr / bc1) * m[i] / den
            if decay_after:
                p[i] = p[i] * (1 - lr * wd)
    out = {"params": p, "exp_avg": m, "exp_avg_sq": v}
    if t["master"] is not None:
        out["master"] = p
    if vmax is not None:
        out["max_exp_avg_sq"] = vmax
    return out


def _minus(a: list, b: list) -> list:
    return [x - y for x, y in zip(a, b)]


def _norm(xs: list) -> float:
    return math.sqrt(sum(float((x * x).sum()) for x in xs))


def _clipped(t: Mapping, attrs: Mapping, coefs: list) -> dict:
    """The golden on the unscaled gradients times coefs[i] (in place of its own clip)."""
    g, _ = golden.unscale_clip(t["grads"], attrs["loss_scale"], 0.0)
    return _golden(t, attrs, grads=[x * c for x, c in zip(g, coefs)], loss_scale=1.0,
                   max_norm=0.0)


def terms(p: Mapping, t: Mapping, attrs: Mapping, ev: Evidence) -> dict:
    """The terms of every wrong state output (each a golden evaluation or two)."""
    wrong = [o for o in ev.wrong if o in STATE]
    found = {o: [] for o in wrong}
    if not wrong or len(t["params"]) > MAX_TERM_TENSORS or \
            sum(x.numel() for x in t["params"]) > MAX_TERM_ELEMENTS:
        return found
    base = _golden(t, attrs)
    if float(base["found_inf"][0]):
        return found  # the golden skips: no hypothesis of the step applies

    def add(name, doc, result):
        for o in wrong:
            if result.get(o) is not None:
                found[o].append(Term(name, doc, _minus(result[o], base[o])))

    step = attrs["step"]
    add("bias_correction_missing", "the update without the bias corrections",
        _golden(t, attrs, step=NO_CORRECTION))
    add("bias_correction_next", "the update with the bias corrections of step t + 1",
        _golden(t, attrs, step=step + 1))
    if step > 1:
        add("bias_correction_previous", "the update with the bias corrections of step t - 1",
            _golden(t, attrs, step=step - 1))
    if attrs["loss_scale"] != 1:
        add("unscale_missing", "the step on gradients not divided by the loss scale",
            _golden(t, attrs, loss_scale=1.0))
    if attrs["max_norm"] > 0:
        clip, n = attrs["max_norm"], len(t["grads"])
        g, _ = golden.unscale_clip(t["grads"], attrs["loss_scale"], 0.0)
        c = clip / (_norm(g) + 1e-6)
        if c > 1:
            add("clip_uncapped", "the step with the clip coefficient not capped at 1",
                _clipped(t, attrs, [c] * n))
        if n > 1:
            add("clip_per_tensor", "the step with each gradient clipped by its own norm",
                _clipped(t, attrs, [min(1.0, clip / (_norm([x]) + 1e-6)) for x in g]))
        if attrs["loss_scale"] != 1:  # the norm of the gradients as they arrive
            c = min(1.0, clip / (_norm(t["grads"]) + 1e-6))
            add("clip_norm_scaled", "the step with the clip norm taken of the gradients "
                "still times the loss scale", _clipped(t, attrs, [c] * n))
    if attrs["amsgrad"]:
        add("amsgrad_unused", "the update with v, not amsgrad's max, in the denominator",
            {o: v for o, v in _golden(t, attrs, amsgrad=False, max_exp_avg_sq=None).items()
             if o in WEIGHTS})
    if len(t["params"]) > 1:
        add("step_per_tensor", "the update with tensor i at step count t + i",
            _per_tensor_step(t, attrs))
    if attrs["weight_decay"] > 0:
        add("coupled_l2", "the step with weight decay added to the gradient (L2)",
            _steps_changed(t, attrs, coupled=True))
    add("eps_in_sqrt", "the update with eps inside the square root",
        _steps_changed(t, attrs, eps_inside=True))
    add("bc2_unrooted", "the update with sqrt(v) divided by 1 - beta2^t, not by its root",
        _steps_changed(t, attrs, bc2_unrooted=True))
    if attrs["weight_decay"] > 0 and attrs["lr"] > 0:
        add("decay_after_update", "the step with the weight decay applied after the update",
            _steps_changed(t, attrs, decay_after=True))
    if attrs["maximize"]:
        add("maximize_on_update", "the step with maximize negating the update, not the "
            "gradient", _steps_changed(t, attrs, maximize_on_update=True))
    add("moments_bf16", "the step with the moments rounded to bf16",
        _steps_changed(t, attrs, moments_bf16=True))
    # the update itself: a weight left as it was is -1 x this
    before = {"params": t["master"] if t["master"] is not None else t["params"],
              "master": t["master"]}
    for o in WEIGHTS:
        if o in found and before[o] is not None:
            found[o].append(Term("update", "the update", _minus(base[o], before[o])))
    return found


# ---------------------------------------------------------------- checked hypotheses

def _too_big(t: Mapping) -> bool:
    return len(t["params"]) > MAX_TERM_TENSORS or \
        sum(x.numel() for x in t["params"]) > MAX_TERM_ELEMENTS


def _golden_terms(p: Mapping, t: Mapping, attrs: Mapping) -> dict:
    if _too_big(t):
        return {}
    return golden.terms(*(t[k] for k in _INPUTS), **attrs)


def _perturbed(p: Mapping, t: Mapping, attrs: Mapping, base: Mapping) -> dict:
    """The step under stories of a changed attribute (each a float64 step of its own)."""
    if _too_big(t) or float(base["found_inf"][0]):
        return {}
    found = {"bc1_missing": _steps_changed(t, attrs, bc1_missing=True),
             "bc2_missing": _steps_changed(t, attrs, bc2_missing=True)}
    if attrs["weight_decay"] > 0:
        found["decay_without_lr"] = _steps_changed(t, attrs, decay_without_lr=True)
    if attrs["beta1"] != attrs["beta2"]:
        found["betas_swapped"] = _golden(t, attrs, beta1=attrs["beta2"], beta2=attrs["beta1"])
    found["maximize_flipped"] = _golden(t, attrs, maximize=not attrs["maximize"])
    return found


CHECKED = Hypotheses(
    op="adamw",
    terms={"weight": "the weight before the step", "decay": "-lr wd p (the weight decay)",
           "update": "-lr m_hat / (sqrt(v_hat) + eps) (the update)",
           "bias_correction": "the bias corrections' share of the update",
           "m_decay": "beta1 m", "m_grad": "(1 - beta1) g", "v_decay": "beta2 v",
           "v_grad": "(1 - beta2) g^2"},
    golden_terms=_golden_terms,
    attributes={"bc1_missing": "without the bias correction of m (1 - beta1^t)",
                "bc2_missing": "without the bias correction of v (1 - beta2^t)",
                "decay_without_lr": "with the weight decay not times lr: p (1 - wd)",
                "betas_swapped": "with beta1 and beta2 swapped",
                "maximize_flipped": "with maximize read the other way"},
    perturbed=_perturbed)


# ---------------------------------------------------------------- causes and rules

def _weights(e: Evidence, family: str, coef: float = 1.0) -> bool:
    """The parameters (or the master) are wrong by coef x the term, the moments right."""
    return not any(o in e.wrong for o in MOMENTS) and any(
        e.explains(o, family, coef) for o in WEIGHTS if o in e.wrong)


def _moments(e: Evidence, family: str) -> bool:
    return any(e.explains(o, family, 1.0) for o in MOMENTS if o in e.wrong)


def _skip_ignored(e: Evidence) -> bool:
    """An inf or NaN gradient, and the state moved (whether or not found_inf says so: a
    check for infinities alone misses the NaN and the step runs)."""
    return e.f("nonfinite") and any(o in e.wrong for o in STATE)


def _later_tensors(e: Evidence) -> bool:
    """Only the weights wrong, in every tensor but the first."""
    return not any(o in e.wrong for o in MOMENTS) and any(
        (pat := e.along(o, "tensor")) is not None and pat.all_but_first for o in WEIGHTS)


C = Cause
CAUSES = (
    CauseSpec(C.BIAS_CORRECTION, "bias correction missing or off by one step",
              "the update divides m by 1 - b1^t and sqrt(v) by sqrt(1 - b2^t), t the step "
              "count of this update (incremented before it, counted from 1)",
              requires=lambda f: f["adam_moves"]),
    CauseSpec(C.COUPLED_DECAY, "weight decay coupled as L2",
              "AdamW decays the weight, p (1 - lr wd), apart from the gradient: wd p must "
              "not enter the moments", requires=lambda f: f["decay"]),
    CauseSpec(C.EPS_IN_SQRT, "eps inside the square root",
              "the denominator is sqrt(v_hat) + eps, not sqrt(v_hat + eps)",
              requires=lambda f: f["adam_moves"]),
    CauseSpec(C.SKIP_IGNORED, "skipped step not honoured on inf/NaN",
              "when found_inf is set nothing may move: no parameter, master or moment",
              requires=lambda f: f["nonfinite"]),
    CauseSpec(C.CLIP_ABOVE_ONE, "clip coefficient above 1",
              "the clip coefficient is min(1, max_norm / (norm + 1e-6)): clipping never "
              "scales gradients up", requires=lambda f: f["clip"]),
    CauseSpec(C.MOMENTS_16BIT, "moments rounded to 16-bit",
              "exp_avg and exp_avg_sq are fp32 state: load, update and store them in fp32",
              requires=lambda f: f["moments_move"]),
    CauseSpec(C.MASTER_STALE, "master weights not written back",
              "after the update on the fp32 master, the parameter is set to its cast",
              requires=lambda f: f["master"] and f["adam_moves"]),
    CauseSpec(C.STEP_PER_TENSOR, "step count differs across tensors",
              "one step count for every tensor of the list: incremented once per step, not "
              "once per tensor", requires=lambda f: f["multi_tensor"] and f["adam_moves"]),
    CauseSpec(C.UNSCALE_MISSING, "loss scale not removed",
              "the gradients arrive times the loss scale: divide by it before the norm, "
              "the clip and the moments", requires=lambda f: f["scaled"]),
    CauseSpec(C.AMSGRAD_UNUSED, "amsgrad's max of v kept but not used",
              "with amsgrad the denominator is sqrt(max_exp_avg_sq), the running max",
              requires=lambda f: f["amsgrad_max"] and f["adam_moves"]),
    CauseSpec(C.DECAY_AFTER_UPDATE, "weight decay applied after the update",
              "the decoupled decay scales the weight before the Adam update: p (1 - lr wd) "
              "- lr u, not (p - lr u) (1 - lr wd)",
              requires=lambda f: f["decay"] and f["adam_moves"]),
    CauseSpec(C.CLIP_PER_TENSOR, "each gradient clipped by its own norm, not the list's",
              "clipping takes one norm over every gradient of the list and scales them all "
              "by one coefficient", requires=lambda f: f["clip"] and f["multi_tensor"]),
    CauseSpec(C.CLIP_NORM_SCALED, "clip norm taken of the gradients still times the loss "
              "scale", "unscale first: the norm is of the gradients divided by the loss "
              "scale, the ones its coefficient scales",
              requires=lambda f: f["clip"] and f["scaled"]),
    CauseSpec(C.BIAS_CORRECTION_UNROOTED, "second bias correction not square-rooted: "
              "sqrt(v) / (1 - b2^t)", "the denominator is sqrt(v) / sqrt(1 - b2^t) + eps",
              requires=lambda f: f["adam_moves"]),
    CauseSpec(C.MAXIMIZE_ON_UPDATE, "maximize negating the update, not the gradient (the "
              "moments keep the gradient's sign)", "with maximize the gradient is negated "
              "before it enters the moments; the update keeps its sign",
              requires=lambda f: f["maximize"] and f["moments_move"]),
) + generic_causes(
    tile_offset=lambda f: f["multi_tensor"],
    tile_position=lambda f: f["multi_tensor"],
    first_index=lambda f: f["multi_tensor"],
    last_index=lambda f: f["multi_tensor"],
    one_index=lambda f: f["multi_tensor"],
    stride=lambda f: f["multi_tensor"],
    precision=lambda f: f["low_precision"])

# Order: what the outputs and features show alone, then the exact term fits, then the
# pattern along the list; the generic period-search causes only when none holds.
RULES = (
    Rule(C.SKIP_IGNORED, _skip_ignored),
    Rule(C.MASTER_STALE, lambda e: e.f("master") and e.only("params")
         and e.explains("params", "update", -1.0)),
    Rule(C.BIAS_CORRECTION, lambda e: any(_weights(e, f) for f in (
        "bias_correction_missing", "bias_correction_next", "bias_correction_previous"))),
    Rule(C.BIAS_CORRECTION_UNROOTED, lambda e: _weights(e, "bc2_unrooted")),
    Rule(C.EPS_IN_SQRT, lambda e: _weights(e, "eps_in_sqrt")),
    Rule(C.DECAY_AFTER_UPDATE, lambda e: _weights(e, "decay_after_update")),
    Rule(C.MAXIMIZE_ON_UPDATE, lambda e: _moments(e, "maximize_on_update")),
    Rule(C.AMSGRAD_UNUSED, lambda e: e.f("amsgrad") and _weights(e, "amsgrad_unused")),
    Rule(C.STEP_PER_TENSOR, lambda e: _weights(e, "step_per_tensor")),
    Rule(C.COUPLED_DECAY, lambda e: _moments(e, "coupled_l2")),
    Rule(C.CLIP_ABOVE_ONE, lambda e: _moments(e, "clip_uncapped")),
    Rule(C.CLIP_PER_TENSOR, lambda e: _moments(e, "clip_per_tensor")),
    Rule(C.CLIP_NORM_SCALED, lambda e: _moments(e, "clip_norm_scaled")),
    Rule(C.UNSCALE_MISSING, lambda e: _moments(e, "unscale_missing")),
    Rule(C.MOMENTS_16BIT, lambda e: _moments(e, "moments_bf16")),
    Rule(C.STEP_PER_TENSOR, _later_tensors),
)
CAUSES += CHECKED.causes
# the checked hypotheses where the rules above name nothing; the generic period-search
# causes where neither does
RULES = ordered(RULES, CHECKED.rules, (precision_rule("low_precision"),) + GENERIC_RULES)

SPEC = DiagnosisSpec(causes=CAUSES, rules=RULES, features=FEATURES,
                     case_features=case_features, regions=regions, terms=terms, axes=AXES,
                     hypotheses=CHECKED)
