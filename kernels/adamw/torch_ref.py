"""AdamW through PyTorch's own optimizer code (`torch.optim.adam.adam` with
decoupled_weight_decay, what torch.optim.AdamW.step calls), in three forms: the for-loop
(`torch_ref`, the same-dtype yardstick: each in-place op rounds to the parameter dtype),
`foreach=True` and `fused=True`.

Around it, as a training step does: the gradients unscaled in fp32 (GradScaler's
unscale_, the skip on an inf or NaN anywhere), clipped by the global norm
(clip_grad_norm_'s coefficient min(1, max_norm / (norm + 1e-6))), the update on the fp32
masters when there are some, then each parameter set to its master's cast.
"""

from __future__ import annotations

import torch
from torch.optim.adam import adam

from suite.registry import implementation


def _step(variant: dict, *, params, grads, master, exp_avg, exp_avg_sq, max_exp_avg_sq, lr,
          beta1, beta2, eps, weight_decay, step, steps, maximize, amsgrad, loss_scale,
          max_norm, out):
    g = [x.float() * (1.0 / loss_scale) for x in grads]
    found = any(not bool(torch.isfinite(x).all()) for x in g)
    out["found_inf"].fill_(1.0 if found else 0.0)
    if found:  # GradScaler skips optimizer.step(): no tensor moves, no step is counted
        return
    if max_norm > 0:
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(x) for x in g]))
        coef = (max_norm / (norm + 1e-6)).clamp(max=1.0)
        g = [x * coef for x in g]
    target = master if master is not None else params
    # the step counts before this call's first update (adam increments them first)
    counts = [torch.tensor(float(step - 1)) for _ in target]
    for _ in range(steps):
        adam(target, g, exp_avg, exp_avg_sq, max_exp_avg_sq or [], counts, amsgrad=amsgrad,
             beta1=beta1, beta2=beta2, lr=lr, weight_decay=weight_decay, eps=eps,
             maximize=maximize, decoupled_weight_decay=True, **variant)
    if master is not None:
        for p, m in zip(params, master):
            p.copy_(m)


def _fused_refuses(p) -> str | None:
    if p["dtype"] != "float32" and not p["master"]:
        return ("torch's fused AdamW needs parameters, gradients and moments of one dtype: "
                "it refuses 16-bit parameters with fp32 moments")
    return None


@implementation("adamw", "torch_ref", kind="native", version=torch.__version__)
def torch_ref(**kw):
    """torch.optim's for-loop AdamW (foreach=False), in the parameter dtype"""
    _step(dict(foreach=False), **kw)


@implementation("adamw", "torch_foreach", kind="native", version=torch.__version__)
def torch_foreach(**kw):
    """torch.optim's multi-tensor AdamW (foreach=True)"""
    _step(dict(foreach=True), **kw)


@implementation("adamw", "torch_fused", kind="native", version=torch.__version__,
                supports=_fused_refuses)
def torch_fused(**kw):
    """torch.optim's fused AdamW (fused=True)"""
    _step(dict(fused=True), **kw)
