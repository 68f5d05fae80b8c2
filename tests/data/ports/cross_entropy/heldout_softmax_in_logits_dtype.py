"""Fused cross entropy, from docs/ops/cross_entropy.md; planted bug: p = exp(x' - lse) is rounded to the logits dtype before the target is subtracted."""

import torch


def forward_backward(*, logits, targets, grad_loss, ignore_index, label_smoothing, reduction,
                     z_loss, softcap, shift, seq_len, out, **_):
    x = logits.double()
    N, V = x.shape
    y = targets.clone()
    if shift:
        t = targets.reshape(-1, seq_len)
        y = torch.full_like(t, ignore_index)
        y[:, :-1] = t[:, 1:]
        y = y.reshape(-1)
    valid = y != ignore_index
    if softcap > 0:
        th = torch.tanh(x / softcap)
        xc = softcap * th
    else:
        xc = x
    m = xc.max(dim=1, keepdim=True).values
    lse = m.squeeze(1) + (xc - m).exp().sum(dim=1).log()
    p = (xc - lse[:, None]).exp().to(logits.dtype).double()
    ys = torch.where(valid, y, 0)
    eps = label_smoothing
    xy = xc.gather(1, ys[:, None]).squeeze(1)
    loss = (1 - eps) * (lse - xy) + eps * (lse - xc.mean(dim=1)) + z_loss * lse * lse
    grad = p * (1 + 2 * z_loss * lse)[:, None] - eps / V
    grad[torch.arange(N), ys] -= 1 - eps
    if softcap > 0:
        grad = grad / torch.cosh(x / softcap) ** 2
    loss = torch.where(valid, loss, 0.0)
    grad = torch.where(valid[:, None], grad, 0.0)
    g = grad_loss.double()
    if reduction == "none":
        out["loss"].copy_(loss)
        out["dlogits"].copy_(grad * g[:, None])
        return
    a = 1.0 / max(int(valid.sum()), 1) if reduction == "mean" else 1.0
    out["loss"].copy_(loss.sum() * a)
    out["dlogits"].copy_(grad * (g * a))
