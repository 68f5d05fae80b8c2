"""AdamW through PyTorch's own optimizer code (`torch.optim.adam.adam` with
decoupled_weight_decay, what torch.optim.AdamW.step calls), in three forms: the for-loop
(`torch_ref`, the same-dtype yardstick: each in-place op rounds to the parameter dtype),
`foreach=True` and `fused=True`.

Around it, as a training step with GradScaler and clip_grad_norm_ does (without a scaler,
a plain `optimizer.step()`: no unscale, no check, no skip):
- the gradients unscaled in place in fp32 with the inf/NaN check in the same pass
  (GradScaler.unscale_: `_amp_foreach_non_finite_check_and_unscale_`); 16-bit gradients
  are first cast into fp32 gradients of the masters, as a mixed-precision trainer keeps;
- clipped by the global norm, clip_grad_norm_'s foreach path (coefficient
  min(1, max_norm / (norm + 1e-6)), no host sync);
- the skip on an inf: the for-loop and foreach forms read found_inf on the host (one
  sync, GradScaler's step for such optimizers); the fused form gets found_inf on the
  device and skips inside its kernel, as GradScaler hands it to fused optimizers;
- the update on the fp32 masters when there are some, then each parameter set to its
  master's cast.
The gradients are the op's scratch input (`consumes`), so writing them is allowed.
"""

from __future__ import annotations

import torch
from torch.optim.adam import adam

from bwd_suite.suite.registry import implementation


def _unscaled(grads: list, loss_scale: float, found: torch.Tensor, scaler: bool) -> list:
    """fp32 gradients divided by the loss scale, `found` set to 1 on any inf or NaN; as
    given (cast to fp32) without a scaler."""
    g = grads
    if grads and grads[0].dtype != torch.float32:
        g = [torch.empty_like(x, dtype=torch.float32) for x in grads]
        torch._foreach_copy_(g, grads)
    if g and scaler:
        inv = torch.full((), 1.0 / loss_scale, dtype=torch.float32, device=found.device)
        torch._amp_foreach_non_finite_check_and_unscale_(g, found, inv)
    return g


def _clip_(g: list, max_norm: float) -> None:
    norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(g)))
    torch._foreach_mul_(g, (max_norm / (norm + 1e-6)).clamp(max=1.0))


def _step(variant: dict, *, params, grads, master, exp_avg, exp_avg_sq, max_exp_avg_sq, lr,
          beta1, beta2, eps, weight_decay, step, steps, maximize, amsgrad, scaler,
          loss_scale, max_norm, out):
    found = out["found_inf"]
    found.zero_()
    g = _unscaled(grads, loss_scale, found, scaler)
    fused = variant.get("fused", False)
    if scaler and not fused and found.item():  # GradScaler skips optimizer.step(): nothing moves
        return
    if max_norm > 0:
        _clip_(g, max_norm)
    target = master if master is not None else params
    # the step counts before this call's first update (adam increments them first); the
    # fused kernel reads them on the device (one allocation, viewed per tensor)
    dev = found.device if fused else torch.device("cpu")
    counts = list(torch.full((len(target),), float(step - 1), device=dev).unbind())
    extra = dict(found_inf=found.view(())) if fused and scaler else {}  # its step counts are 0-d
    for _ in range(steps):
        adam(target, g, exp_avg, exp_avg_sq, max_exp_avg_sq or [], counts, amsgrad=amsgrad,
             beta1=beta1, beta2=beta2, lr=lr, weight_decay=weight_decay, eps=eps,
             maximize=maximize, decoupled_weight_decay=True, **variant, **extra)
    if master is not None:
        torch._foreach_copy_(params, master)


def _fused_refuses(p) -> str | None:
    if p["dtype"] != "float32" and not p["master"]:
        return ("torch's fused AdamW needs parameters, gradients and moments of one dtype: "
                "it refuses 16-bit parameters with fp32 moments")
    return None


# exp_avg by lerp(grad, 1 - beta1), the weight rounded to fp32: with beta1 near 0 the old
# moment's share is off by up to 2^-25, relative 2^-25 / beta1 (cases/adamw/findings.toml;
# fuzzed on the CPU). The fused CPU kernel shares it; the fused CUDA one forms
# beta1 * m + (1 - beta1) * g and should not.
_LERP_WHY = ("exp_avg by lerp(grad, 1 - beta1) with the weight in fp32: off by up to "
             "2^-25 / beta1 when beta1 is near 0")
_LERP_KNOWN = {"adamw/torch-lerp-": _LERP_WHY}


@implementation("adamw", "torch_ref", kind="native", version=torch.__version__,
                known_failures=_LERP_KNOWN)
def torch_ref(**kw):
    """torch.optim's for-loop AdamW (foreach=False), in the parameter dtype"""
    _step(dict(foreach=False), **kw)


@implementation("adamw", "torch_foreach", kind="native", version=torch.__version__,
                known_failures=_LERP_KNOWN)
def torch_foreach(**kw):
    """torch.optim's multi-tensor AdamW (foreach=True)"""
    _step(dict(foreach=True), **kw)


# On the H200 (torch 2.11, perf runs 20261202T143428Z-12fa95 and 20261203T231915Z-697a77,
# gpu runs 20261203T225757Z-952327 and 20261204T053314Z-0bedc9) its exp_avg_sq is 1.3e-5
# of max|golden| off, 4-12x the bound, wherever the moments move by more than the bound
# allows (fp32 moments; 16-bit parameters with masters): the pattern of 1 - beta2 formed
# in fp32, which our kernel showed until it took 1 - beta from the host in double. The
# CPU kernel passes.
_FUSED_WHY = "exp_avg_sq off by 1.3e-5 of its largest value (likely 1 - beta2 in fp32)"
_FUSED_KNOWN = {f"cuda:adamw/{c}": _FUSED_WHY for c in (
    "one-tensor-2p28/", "one-tensor-2p28-scaler/", "gpt2/", "tiny-4000/", "sizes/n1-fp32$", "sizes/n7-fp32$",
    "sizes/n1000-fp32$", "sizes/n4099-fp32$", "sizes/n7.1.130.4099-fp32$",
    "presets/n1000-mixed-fp32$",
    "presets/n1000-tiny_many-fp32$", "features/n7.1000-fp32$", "big/n16777219-fp32$",
    "clip-slack/n7.130-fp32-clip100.0$", "master-lr/n7.130-bf16-master-lr0.5$",
    "gpt2-large/n1000-gpt2_large-bf16-master$", "plain/n7.1000-fp32-plain$",
    "plain/n7.1000-fp32-plain-clip2.0$",
    "plain/n7.1000-bf16-master-plain$", "plain/n7.1000-bf16-master-plain-clip2.0$")}
_FUSED_KNOWN["cpu:adamw/torch-lerp-"] = _LERP_WHY


@implementation("adamw", "torch_fused", kind="native", version=torch.__version__,
                supports=_fused_refuses, known_failures=_FUSED_KNOWN)
def torch_fused(**kw):
    """torch.optim's fused AdamW (fused=True), found_inf handed to its kernel"""
    _step(dict(fused=True), **kw)
