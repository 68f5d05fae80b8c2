"""AdamW step, from docs/ops/adamw.md; planted bug: lr = 0 returns early, so the moments are not updated."""

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
    if lr == 0:  # nothing moves at lr 0
        return
    if max_norm > 0:
        norm = math.sqrt(sum(float((x.double() ** 2).sum()) for x in g))
        c = min(1.0, max_norm / (norm + 1e-6))
        g = [x * c for x in g]
    w = master if master is not None else [p.float() for p in params]
    for t in range(step, step + steps):
        bc1, bc2 = 1 - beta1 ** t, 1 - beta2 ** t
        for i in range(len(w)):
            gi = -g[i] if maximize else g[i]
            w[i].mul_(1 - lr * weight_decay)
            exp_avg[i].mul_(beta1).add_(gi, alpha=1 - beta1)
            exp_avg_sq[i].mul_(beta2).addcmul_(gi, gi, value=1 - beta2)
            v = exp_avg_sq[i]
            if amsgrad:
                torch.maximum(max_exp_avg_sq[i], v, out=max_exp_avg_sq[i])
                v = max_exp_avg_sq[i]
            den = v.sqrt() / math.sqrt(bc2) + eps
            w[i].addcdiv_(exp_avg[i], den, value=-lr / bc1)
    for p, x in zip(params, w):
        if p is not x:
            p.copy_(x)
