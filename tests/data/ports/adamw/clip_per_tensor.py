"""AdamW port that clips each gradient by its own norm (max_norm per tensor) instead of by
the global norm over the whole list."""

import math

import torch


def step(*, params, grads, master, exp_avg, exp_avg_sq, max_exp_avg_sq, lr, beta1, beta2,
         eps, weight_decay, step, steps, maximize, amsgrad, scaler, loss_scale, max_norm,
         out):
    g = [x.float() / loss_scale for x in grads]
    found = scaler and not all(bool(torch.isfinite(x).all()) for x in g)
    out["found_inf"].fill_(1.0 if found else 0.0)
    if found:
        return
    if max_norm > 0:
        g = [x * min(1.0, max_norm / (float(x.double().norm()) + 1e-6)) for x in g]
    for i, p in enumerate(params):
        w = master[i] if master is not None else p.float()
        gi = -g[i] if maximize else g[i]
        for t in range(step, step + steps):
            w.mul_(1 - lr * weight_decay)
            exp_avg[i].mul_(beta1).add_(gi, alpha=1 - beta1)
            exp_avg_sq[i].mul_(beta2).addcmul_(gi, gi, value=1 - beta2)
            v = exp_avg_sq[i]
            if amsgrad:
                max_exp_avg_sq[i].copy_(torch.maximum(max_exp_avg_sq[i], v))
                v = max_exp_avg_sq[i]
            den = v.sqrt() / math.sqrt(1 - beta2 ** t) + eps
            w.addcdiv_(exp_avg[i], den, value=-lr / (1 - beta1 ** t))
        p.copy_(w)
