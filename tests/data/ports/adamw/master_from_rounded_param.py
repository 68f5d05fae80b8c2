"""AdamW port with master weights that updates the 16-bit parameter and then refreshes
the master from it (master = param.float()), so the master keeps only 16-bit precision."""

import math

import torch


def step(*, params, grads, master, exp_avg, exp_avg_sq, max_exp_avg_sq, lr, beta1, beta2,
         eps, weight_decay, step, steps, maximize, amsgrad, scaler, loss_scale, max_norm,
         out):
    g = [x.float() / loss_scale for x in grads]
    if scaler and not all(bool(torch.isfinite(x).all()) for x in g):
        out["found_inf"].fill_(1.0)
        return
    out["found_inf"].fill_(0.0)
    if max_norm > 0:
        norm = math.sqrt(sum(float((x.double() ** 2).sum()) for x in g))
        g = [x * min(1.0, max_norm / (norm + 1e-6)) for x in g]
    for i, p in enumerate(params):
        w = master[i].clone() if master is not None else p.float()
        gi = -g[i] if maximize else g[i]
        for t in range(step, step + steps):
            w.mul_(1 - lr * weight_decay)
            exp_avg[i].mul_(beta1).add_(gi, alpha=1 - beta1)
            exp_avg_sq[i].mul_(beta2).addcmul_(gi, gi, value=1 - beta2)
            v = exp_avg_sq[i]
            if amsgrad:
                torch.maximum(max_exp_avg_sq[i], v, out=max_exp_avg_sq[i])
                v = max_exp_avg_sq[i]
            w.addcdiv_(exp_avg[i], v.sqrt() / math.sqrt(1 - beta2 ** t) + eps,
                       value=-lr / (1 - beta1 ** t))
        p.copy_(w)
        if master is not None:
            master[i].copy_(p)
