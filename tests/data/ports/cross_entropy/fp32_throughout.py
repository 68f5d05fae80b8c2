"""Cross entropy port computed in fp32 throughout (lse around the row max, p, the
gradient), where p - 1 of near one-hot rows and 1 + 2 z lse - 1 of one-class rows keep
too few digits; loss stored in fp32, dlogits rounded once."""

import torch


def forward_backward(*, logits, targets, grad_loss, ignore_index, label_smoothing,
                     reduction, z_loss, softcap, shift, seq_len, out, **_trainer):
    N, V = logits.shape
    tgt = targets
    if shift:
        t = targets.reshape(-1, seq_len)
        tgt = torch.full_like(t, ignore_index)
        tgt[:, :-1] = t[:, 1:]
        tgt = tgt.reshape(-1)
    valid = tgt != ignore_index
    x = logits.float()
    xc = softcap * torch.tanh(x / softcap) if softcap else x
    m = xc.max(dim=1, keepdim=True).values
    lse = m.squeeze(1) + (xc - m).exp().sum(dim=1).log()
    p = (xc - lse[:, None]).exp()
    safe = torch.where(valid, tgt, torch.zeros_like(tgt))
    xy = xc.gather(1, safe[:, None]).squeeze(1)
    eps = label_smoothing
    loss = (1 - eps) * (lse - xy) + eps * (lse - xc.mean(dim=1)) + z_loss * lse * lse
    grad = p * (1 + 2 * z_loss * lse)[:, None] - eps / V
    grad[torch.arange(N), safe] -= 1 - eps
    if softcap:
        grad = grad * (1 - torch.tanh(x / softcap) ** 2)
    loss = torch.where(valid, loss, 0.0)
    grad = torch.where(valid[:, None], grad, 0.0)
    if reduction == "mean":
        a = 1.0 / max(int(valid.sum()), 1)
        out["loss"].copy_(loss.sum() * a)
        out["dlogits"].copy_(grad * (grad_loss * a))
    elif reduction == "sum":
        out["loss"].copy_(loss.sum())
        out["dlogits"].copy_(grad * grad_loss)
    else:
        out["loss"].copy_(loss)
        out["dlogits"].copy_(grad * grad_loss[:, None])
