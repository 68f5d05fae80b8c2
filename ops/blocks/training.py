"""The loss and the optimizer of the scenarios' step, through the suite's own ops: cross
entropy (ops/cross_entropy.py: forward and backward in one call, shifted targets, masked
labels) and AdamW (ops/adamw.py: unscale by the loss scale, skip on an inf, global-norm
clipping, the update on fp32 master weights and the parameters cast back, in place).

The batch: token ids uniform in [0, V), the labels the same ids with the collator's mask
(ops/cross_entropy_labels.label_mask: a prompt, or right padding of unequal lengths) set to
the ignore index; the loss scores position t against the label of t + 1.
"""

from __future__ import annotations

from typing import Mapping

import torch
import torch.nn.functional as F

from bwd_suite.ops.blocks.nodes import op_params
from bwd_suite.ops.cross_entropy_labels import label_mask
from bwd_suite.suite import inputs as mk
from bwd_suite.suite.opspec import CaseInputs
from bwd_suite.suite.step.models import Training

IGNORE = -100


def batch(p: Mapping, seed: int, device) -> tuple:
    """(tokens, labels), both (B, T) int64 on `device`."""
    gen = mk.generator(seed)
    B, T = p["batch"], p["seq"]
    tokens = torch.randint(0, p["vocab"], (B, T), generator=gen, dtype=torch.int64)
    keep = label_mask({"batch": B, "seq": T, "mask": p["mask"], "mask_len": p["mask_len"],
                       "eos": True})
    labels = torch.where(keep, tokens, torch.full_like(tokens, IGNORE))
    return tokens.to(device), labels.to(device)


def scored(labels: torch.Tensor) -> int:
    """Positions the shifted loss scores: t < T - 1 whose next label is not ignored."""
    return int((labels[:, 1:] != IGNORE).sum())


class _CrossEntropy(torch.autograd.Function):
    """The cross entropy op computes the loss and dlogits in one call (fused kernels do):
    the forward calls the run's implementation with the upstream gradient `weight` (the loss
    scale over the denominator), keeps dlogits, and the backward hands them on."""

    @staticmethod
    def forward(ctx, backends, weight: float, logits, labels):
        N, V = logits.shape
        T = labels.shape[1]
        acc = torch.promote_types(logits.dtype, torch.float32)
        p = op_params("cross_entropy", logits, batch=labels.shape[0], seq=T, vocab=V,
                      reduction="sum", shift=True)
        attrs = {"ignore_index": IGNORE, "label_smoothing": 0.0, "reduction": "sum",
                 "z_loss": 0.0, "softcap": 0.0, "shift": True, "seq_len": T}
        grad = torch.full((), weight, dtype=acc, device=logits.device)
        out = backends.call("cross_entropy", p, CaseInputs(
            {"logits": logits, "targets": labels.reshape(-1), "grad_loss": grad}, attrs))
        ctx.save_for_backward(out["dlogits"])
        return out["loss"].to(acc) * weight

    @staticmethod
    def backward(ctx, g):
        (dlogits,) = ctx.saved_tensors
        return None, None, dlogits * g.to(dlogits.dtype), None


def loss(backends, logits: torch.Tensor, labels: torch.Tensor, weight: float):
    """weight * (the summed loss of the scored positions), on the graph."""
    if backends.native:  # as users write it: fp32 logits, the labels shifted by one
        B, T = labels.shape
        shifted = logits.view(B, T, -1)[:, :-1].float()
        return F.cross_entropy(shifted.reshape(-1, shifted.shape[-1]),
                               labels[:, 1:].reshape(-1), ignore_index=IGNORE,
                               reduction="sum") * weight
    return _CrossEntropy.apply(backends, weight, logits, labels)


class AdamW:
    """AdamW with fp32 master weights for 16-bit parameters, through the adamw op."""

    def state(self, params: list, dtype) -> dict:
        acc = torch.promote_types(dtype, torch.float32)
        master = [p.detach().float().clone() for p in params] \
            if dtype in (torch.bfloat16, torch.float16) else None
        zeros = lambda: [torch.zeros_like(p, dtype=acc) for p in params]  # noqa: E731
        return {"master": master, "exp_avg": zeros(), "exp_avg_sq": zeros()}

    def step(self, backends, params: list, grads: list, state: dict, count: int,
             hyper: Mapping) -> bool:
        """One update, step count `count`; True when a gradient held an inf or NaN (then
        nothing changed)."""
        first = params[0]
        p = op_params("adamw", first, sizes=[x.numel() for x in params], steps=1,
                      master=state["master"] is not None, scaler=True,
                      **{k: hyper[k] for k in ("lr", "beta1", "beta2", "eps", "weight_decay",
                                               "loss_scale", "max_norm")})
        attrs = {k: hyper[k] for k in ("lr", "beta1", "beta2", "eps", "weight_decay",
                                       "loss_scale", "max_norm")}
        attrs.update(step=count, steps=1, maximize=False, amsgrad=False, scaler=True)
        with torch.no_grad():
            out = backends.call("adamw", p, CaseInputs(
                {"params": [x.detach() for x in params], "grads": [g.detach() for g in grads],
                 "master": state["master"], "exp_avg": state["exp_avg"],
                 "exp_avg_sq": state["exp_avg_sq"], "max_exp_avg_sq": None}, attrs))
        return bool(out["found_inf"].item())


TRAINING = Training(batch=batch, scored=scored, loss=loss, optimizer=AdamW(),
                    ops=("cross_entropy", "adamw"))
