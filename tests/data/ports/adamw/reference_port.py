"""A correct AdamW port (the control): GradScaler's unscale and skip, global-norm clip,
then `steps` AdamW steps in fp32 on each tensor (on the master where there is one)."""

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
        c = min(1.0, max_norm / (norm + 1e-6))
        g = [x * c for x in g]
    for i, p in enumerate(params):
        w = master[i] if master is not None else p.float()
        m, v = exp_avg[i], exp_avg_sq[i]
        gi = -g[i] if maximize else g[i]
        for t in range(step, step + steps):
            bc1, bc2 = 1 - beta1 ** t, 1 - beta2 ** t
            w.mul_(1 - lr * weight_decay)
            m.mul_(beta1).add_(gi, alpha=1 - beta1)
            v.mul_(beta2).addcmul_(gi, gi, value=1 - beta2)
            if amsgrad:
                torch.maximum(max_exp_avg_sq[i], v, out=max_exp_avg_sq[i])
                den = max_exp_avg_sq[i].sqrt() / math.sqrt(bc2) + eps
            else:
                den = v.sqrt() / math.sqrt(bc2) + eps
            w.addcdiv_(m, den, value=-lr / bc1)
        p.copy_(w)
