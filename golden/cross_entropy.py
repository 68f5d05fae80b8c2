"""Cross entropy over the last dim, forward and backward together (as fused kernels compute
them), in float64 from the formulas (no autograd).

Per token i with logits x (V,) and aligned target y (ignored when y == ignore_index):

    x'   = c * tanh(x / c)                     with softcap c > 0, else x' = x
    lse  = log sum_j exp(x'_j)                 (computed around max x': stable)
    p    = exp(x' - lse)
    l_i  = (1 - eps) (lse - x'_y) + eps (lse - mean_j x'_j) + z lse^2
    dl_i/dx'_j = p_j (1 + 2 z lse) - (1 - eps) [j == y] - eps / V
    dl_i/dx_j  = dl_i/dx'_j * (1 - tanh^2(x_j / c))   with softcap

eps is the label smoothing (PyTorch's: (1 - eps) nll + eps times the mean over V of
-log p), z the z-loss coefficient (PaLM, Liger). An ignored token has l_i = 0 and a zero
gradient row.

The loss is sum_i a_i l_i: a_i = 1 for sum, 1/D for mean with D the count of non-ignored
tokens; with accumulation over k micro-batches and normalize = micro_batch,
a_i = 1 / (k D_g) with D_g the count of token i's micro-batch (the 2024 gradient-
accumulation bug's semantics, computed here because the case asks for it); with
global_tokens the mean over the whole batch. A mean over zero tokens is 0 with a zero
gradient (Liger's convention; PyTorch's is NaN). For reduction none the loss is l (N,).
dlogits = g_up * a_i * dl_i/dx, g_up the upstream gradient (a scalar, or (N,) for none).
"""

from __future__ import annotations

import torch


def align(targets: torch.Tensor, seq_len: int, shift: bool, ignore_index: int):
    """The target each position is scored against: with shift, position t of a sequence of
    seq_len takes the label of t + 1 and the last position is ignored."""
    if not shift:
        return targets.clone()
    t = targets.reshape(-1, seq_len)
    out = torch.full_like(t, ignore_index)
    out[:, :-1] = t[:, 1:]
    return out.reshape(-1)


def token_terms(logits, targets, *, ignore_index, label_smoothing, z_loss, softcap):
    """(per-token loss (N,), per-token gradient dl_i/dlogits (N, V)) in float64 for aligned
    targets; zero for ignored tokens."""
    x = logits.to(torch.float64)
    N, V = x.shape
    valid = targets != ignore_index
    if softcap:
        th = torch.tanh(x / softcap)
        xc = softcap * th
    else:
        xc = x
    m = xc.max(dim=1, keepdim=True).values if V else xc.new_zeros(N, 1)
    lse = (m + (xc - m).exp().sum(dim=1, keepdim=True).log()).squeeze(1)
    p = (xc - lse[:, None]).exp()
    safe = torch.where(valid, targets, torch.zeros_like(targets))
    xy = xc.gather(1, safe[:, None]).squeeze(1)
    eps = label_smoothing
    loss = (1 - eps) * (lse - xy) + eps * (lse - xc.mean(dim=1)) + z_loss * lse * lse
    grad = p * (1 + 2 * z_loss * lse)[:, None] - eps / V
    grad.scatter_add_(1, safe[:, None], torch.full((N, 1), -(1 - eps), dtype=x.dtype,
                                                  device=x.device))
    if softcap:
        # sech^2, not 1 - tanh^2: the difference cancels to 0 where tanh rounds to 1
        grad = grad / torch.cosh(x / softcap).square()
    loss = torch.where(valid, loss, torch.zeros_like(loss))
    grad = torch.where(valid[:, None], grad, torch.zeros_like(grad))
    return loss, grad


def coefficients(valid: torch.Tensor, reduction: str, accumulation: int,
                 normalize: str) -> torch.Tensor:
    """a_i, each token's weight in the loss (module docstring), float64 (N,)."""
    n = valid.numel()
    if reduction in ("sum", "none"):
        return torch.ones(n, dtype=torch.float64, device=valid.device)
    if normalize == "micro_batch" and accumulation > 1:
        parts = valid.reshape(accumulation, -1)
        count = parts.sum(dim=1, keepdim=True).clamp_min(1).to(torch.float64)
        return (1.0 / (accumulation * count)).expand_as(parts).reshape(-1)
    count = max(int(valid.sum()), 1)
    return torch.full((n,), 1.0 / count, dtype=torch.float64, device=valid.device)


def cross_entropy(logits, targets, grad_loss, *, ignore_index=-100, label_smoothing=0.0,
                  reduction="mean", z_loss=0.0, softcap=0.0, shift=False, seq_len=None,
                  accumulation=1, normalize="global_tokens") -> dict:
    """{loss, dlogits} in float64: loss () for mean and sum, (N,) for none."""
    seq_len = seq_len or logits.shape[0]
    tgt = align(targets, seq_len, shift, ignore_index)
    a = coefficients(tgt != ignore_index, reduction, accumulation, normalize)
    scale = grad_loss.to(torch.float64) * a  # (N,): each row's factor
    N, V = logits.shape
    loss_i = torch.empty(N, dtype=torch.float64, device=logits.device)
    dlogits = torch.empty((N, V), dtype=torch.float64, device=logits.device)
    # rows in chunks of about 2^26 elements: 16384 x 151936 logits are 20 GB in float64,
    # and the whole-batch temporaries five times that
    step = max(1, (1 << 26) // max(V, 1))
    for r in range(0, N, step):
        rows = slice(r, r + step)
        loss_i[rows], grad = token_terms(logits[rows], tgt[rows], ignore_index=ignore_index,
                                         label_smoothing=label_smoothing, z_loss=z_loss,
                                         softcap=softcap)
        torch.mul(grad, scale[rows, None], out=dlogits[rows])
    if reduction == "none":
        return {"loss": loss_i, "dlogits": dlogits}
    return {"loss": (a * loss_i).sum(), "dlogits": dlogits}


def terms(logits, targets, grad_loss, *, ignore_index=-100, label_smoothing=0.0,
          reduction="mean", z_loss=0.0, softcap=0.0, shift=False, seq_len=None,
          accumulation=1, normalize="global_tokens") -> dict:
    """The named terms of each output in float64 (whole batch at once: for cases of a
    size the diagnosis looks at). dlogits = softmax + target + smoothing + z_loss, each
    times the row's factor and the softcap derivative; "softcap" is that derivative's
    share (sech^2 - 1 of the rest). The loss (per token, or reduced as the loss is) =
    nll + smoothing + z_loss. A backward that forgets a term is off by -1 x it."""
    seq_len = seq_len or logits.shape[0]
    tgt = align(targets, seq_len, shift, ignore_index)
    valid = tgt != ignore_index
    a = coefficients(valid, reduction, accumulation, normalize)
    x = logits.to(torch.float64)
    N, V = x.shape
    xc = softcap * torch.tanh(x / softcap) if softcap else x
    m = xc.max(dim=1, keepdim=True).values if V else xc.new_zeros(N, 1)
    lse = (m + (xc - m).exp().sum(dim=1, keepdim=True).log()).squeeze(1)
    p = (xc - lse[:, None]).exp()
    safe = torch.where(valid, tgt, torch.zeros_like(tgt))
    onehot = torch.zeros_like(x).scatter_(1, safe[:, None], 1.0)
    w = (grad_loss.to(torch.float64) * a * valid)[:, None]
    deriv = 1.0 / torch.cosh(x / softcap).square() if softcap else 1.0
    eps = label_smoothing
    parts = {"softmax": p, "target": -(1 - eps) * onehot,
             "smoothing": torch.full_like(x, -eps / V) if V else x.clone(),
             "z_loss": 2 * z_loss * lse[:, None] * p}
    d = {k: v * w * deriv for k, v in parts.items()}
    if softcap:
        d["softcap"] = sum(parts.values()) * w * (deriv - 1.0)
    xy = xc.gather(1, safe[:, None]).squeeze(1)
    per = {"nll": (1 - eps) * (lse - xy),
           "smoothing": eps * (lse - (xc.mean(dim=1) if V else lse)),
           "z_loss": z_loss * lse * lse}
    per = {k: torch.where(valid, v, torch.zeros_like(v)) for k, v in per.items()}
    loss = per if reduction == "none" else {k: (a * v).sum() for k, v in per.items()}
    if not eps:
        for part in (d, loss):
            part.pop("smoothing")
    if not z_loss:
        for part in (d, loss):
            part.pop("z_loss")
    return {"dlogits": d, "loss": loss}
