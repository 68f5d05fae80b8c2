"""AdamW port that measures the clipping norm on the gradients as they arrive (still
times the loss scale) and applies the coefficient to the unscaled ones."""

import math

import torch


def step(*, params, grads, master, exp_avg, exp_avg_sq, max_exp_avg_sq, lr, beta1, beta2,
         eps, weight_decay, step, steps, maximize, amsgrad, scaler, loss_scale, max_norm,
         out):
    raw = [x.float() for x in grads]
    if scaler and not all(bool(torch.isfinite(x).all()) for x in raw):
        out["found_inf"].fill_(1.0)
        return
    out["found_inf"].fill_(0.0)
    coef = 1.0
    if max_norm > 0:
        norm = math.sqrt(sum(float((x.double() ** 2).sum()) for x in raw))
        coef = min(1.0, max_norm / (norm + 1e-6))
    g = [x / loss_scale * coef for x in raw]
    for i, p in enumerate(params):
        w = master[i] if master is not None else p.float()
        m, v = exp_avg[i], exp_avg_sq[i]
        gi = -g[i] if maximize else g[i]
        for t in range(step, step + steps):
            w.mul_(1 - lr * weight_decay)
            m.mul_(beta1).add_(gi, alpha=1 - beta1)
            v.mul_(beta2).addcmul_(gi, gi, value=1 - beta2)
            vv = torch.maximum(max_exp_avg_sq[i], v, out=max_exp_avg_sq[i]) if amsgrad else v
            w.addcdiv_(m, vv.sqrt() / math.sqrt(1 - beta2 ** t) + eps, value=-lr / (1 - beta1 ** t))
        p.copy_(w)
