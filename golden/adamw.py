"""AdamW optimizer steps over a parameter list, from the formulas in float64 (PyTorch's
semantics: torch.optim.AdamW, decoupled weight decay), with GradScaler's unscale and skip
and clip_grad_norm_'s global-norm clipping in front.

Per call, once:

    g_i    = grad_i / S                           (loss scale S: gradients arrive times S)
    skip   = any g_i not finite                   (then nothing changes: found_inf = 1);
                                                  only under a GradScaler (scaler)
    c      = min(1, max_norm / (||g||_2 + 1e-6))  with clipping (max_norm > 0), the norm
                                                  over the whole list; g_i = c g_i

then `steps` times, with t = step, step + 1, ... (the step count of the update):

    g      = -g                                   with maximize
    p      = p (1 - lr wd)
    m      = b1 m + (1 - b1) g
    v      = b2 v + (1 - b2) g^2
    vmax   = max(vmax, v)                         with amsgrad (the denominator uses vmax)
    p      = p - lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)

With master weights the update runs on the fp32 master and the parameter is its cast; the
golden's parameter is the exact master (the cast is the implementation's one rounding).
Every step of a call uses the same gradients.
"""

from __future__ import annotations

import math
from typing import Optional

import torch


def unscale_clip(grads: list, loss_scale: float, max_norm: float, scaler: bool = True):
    """(gradients unscaled and clipped, found_inf) in float64; without a scaler nothing
    checks for an inf or NaN."""
    g = [x.to(torch.float64) / loss_scale for x in grads]
    if scaler and not all(bool(torch.isfinite(x).all()) for x in g):
        return g, True
    if max_norm > 0:
        norm = math.sqrt(sum(float((x * x).sum()) for x in g))
        c = min(1.0, max_norm / (norm + 1e-6))
        g = [x * c for x in g]
    return g, False


def steps_(p: list, g: list, m: list, v: list, vmax: Optional[list], *, lr, beta1, beta2,
           eps, weight_decay, step, steps, maximize) -> None:
    """`steps` AdamW steps in place on float64 lists, the first with step count `step`."""
    for t in range(step, step + steps):
        bc1, bc2 = 1 - beta1 ** t, 1 - beta2 ** t
        for i in range(len(p)):
            gi = -g[i] if maximize else g[i]
            p[i] = p[i] * (1 - lr * weight_decay)
            m[i] = beta1 * m[i] + (1 - beta1) * gi
            v[i] = beta2 * v[i] + (1 - beta2) * gi * gi
            if vmax is not None:
                vmax[i] = torch.maximum(vmax[i], v[i])
            den = (vmax[i] if vmax is not None else v[i]).sqrt() / math.sqrt(bc2) + eps
            p[i] = p[i] - (lr / bc1) * m[i] / den


def adamw(params, grads, master, exp_avg, exp_avg_sq, max_exp_avg_sq, *, lr, beta1, beta2,
          eps, weight_decay, step, steps, maximize, amsgrad, loss_scale, max_norm,
          scaler=True) -> dict:
    """The updated state {params, exp_avg, exp_avg_sq[, master][, max_exp_avg_sq],
    found_inf} in float64; lists as given (master and max_exp_avg_sq None when absent)."""
    f = lambda xs: None if xs is None else [x.to(torch.float64).clone() for x in xs]  # noqa: E731
    p = f(master) if master is not None else f(params)
    m, v = f(exp_avg), f(exp_avg_sq)
    vmax = f(max_exp_avg_sq) if amsgrad else None
    g, found = unscale_clip(grads, loss_scale, max_norm, scaler)
    dev = p[0].device if p else torch.device("cpu")
    if not found:
        steps_(p, g, m, v, vmax, lr=lr, beta1=beta1, beta2=beta2, eps=eps,
               weight_decay=weight_decay, step=step, steps=steps, maximize=maximize)
    out = {"params": p, "exp_avg": m, "exp_avg_sq": v,
           "found_inf": torch.tensor([1.0 if found else 0.0], dtype=torch.float64, device=dev)}
    if master is not None:
        out["master"] = [x.clone() for x in p]
    if vmax is not None:
        out["max_exp_avg_sq"] = vmax
    return out


def terms(params, grads, master, exp_avg, exp_avg_sq, max_exp_avg_sq, *, lr, beta1, beta2,
          eps, weight_decay, step, steps, maximize, amsgrad, loss_scale, max_norm,
          scaler=True) -> dict:
    """The named terms of the last step of the call, per output, in float64 lists (empty
    on a skipped step): the new weight = weight + decay + update, with "bias_correction"
    the corrections' share of the update; exp_avg = m_decay + m_grad, exp_avg_sq = v_decay
    + v_grad. A step that forgets a term is off by -1 x it."""
    f = lambda xs: None if xs is None else [x.to(torch.float64).clone() for x in xs]  # noqa: E731
    p = f(master) if master is not None else f(params)
    m, v = f(exp_avg), f(exp_avg_sq)
    vmax = f(max_exp_avg_sq) if amsgrad else None
    g, found = unscale_clip(grads, loss_scale, max_norm, scaler)
    if found:
        return {}
    kw = dict(lr=lr, beta1=beta1, beta2=beta2, eps=eps, weight_decay=weight_decay,
              maximize=maximize)
    if steps > 1:
        steps_(p, g, m, v, vmax, step=step, steps=steps - 1, **kw)
    t = step + steps - 1
    bc1, bc2 = 1 - beta1 ** t, 1 - beta2 ** t
    names = ("weight", "decay", "update", "bias_correction", "m_decay", "m_grad", "v_decay",
             "v_grad")
    out = {k: [] for k in names}
    for i in range(len(p)):
        gi = -g[i] if maximize else g[i]
        m_new = beta1 * m[i] + (1 - beta1) * gi
        v_new = beta2 * v[i] + (1 - beta2) * gi * gi
        vd = torch.maximum(vmax[i], v_new) if vmax is not None else v_new
        update = -(lr / bc1) * m_new / (vd.sqrt() / math.sqrt(bc2) + eps)
        plain = -lr * m_new / (vd.sqrt() + eps)
        for k, x in zip(names, (p[i], -lr * weight_decay * p[i], update, update - plain,
                                beta1 * m[i], (1 - beta1) * gi, beta2 * v[i],
                                (1 - beta2) * gi * gi)):
            out[k].append(x)
    weights = {k: out[k] for k in ("weight", "decay", "update", "bias_correction")}
    found = {"params": weights, "exp_avg": {k: out[k] for k in ("m_decay", "m_grad")},
             "exp_avg_sq": {k: out[k] for k in ("v_decay", "v_grad")}}
    if master is not None:
        found["master"] = weights
    return found
