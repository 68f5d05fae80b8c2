"""AdamW port that applies the decoupled weight decay after the Adam update instead of
before it: p = (p - lr * u) * (1 - lr * wd)."""

import math

import torch


def step(*, params, grads, master, exp_avg, exp_avg_sq, max_exp_avg_sq, lr, beta1, beta2,
         eps, weight_decay, step, steps, maximize, amsgrad, scaler, loss_scale, max_norm,
         out):
    g = [x.float().div(loss_scale) for x in grads]
    if scaler and any(not torch.isfinite(x).all() for x in g):
        out["found_inf"].fill_(1)
        return
    out["found_inf"].zero_()
    if max_norm > 0:
        total = math.sqrt(sum(float(x.double().square().sum()) for x in g))
        coef = min(1.0, max_norm / (total + 1e-6))
        g = [x * coef for x in g]
    for i in range(len(params)):
        w = master[i] if master is not None else params[i].float()
        gi = g[i].neg() if maximize else g[i]
        m, v = exp_avg[i], exp_avg_sq[i]
        for t in range(step, step + steps):
            m.mul_(beta1).add_(gi * (1 - beta1))
            v.mul_(beta2).add_(gi * gi * (1 - beta2))
            vv = v
            if amsgrad:
                torch.maximum(max_exp_avg_sq[i], v, out=max_exp_avg_sq[i])
                vv = max_exp_avg_sq[i]
            den = vv.sqrt() / math.sqrt(1 - beta2 ** t) + eps
            w.sub_(lr / (1 - beta1 ** t) * m / den)
            w.mul_(1 - lr * weight_decay)
        params[i].copy_(w)
