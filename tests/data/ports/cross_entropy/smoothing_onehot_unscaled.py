"""Cross entropy port whose gradient subtracts the full one-hot at the target (-1), not
(1 - eps), under label smoothing; the loss is right."""

import torch


def forward_backward(*, logits, targets, grad_loss, ignore_index, label_smoothing,
                     reduction, z_loss, softcap, shift, seq_len, out, **_trainer):
    N, V = logits.shape
    if shift:
        t = targets.view(-1, seq_len)
        targets = torch.cat([t[:, 1:], torch.full_like(t[:, :1], ignore_index)], 1).reshape(-1)
    valid = targets != ignore_index
    x = logits.double()
    xc = softcap * torch.tanh(x / softcap) if softcap else x
    lse = torch.logsumexp(xc, dim=1)
    p = torch.exp(xc - lse[:, None])
    tgt = targets.clamp(0, V - 1) * valid
    eps = label_smoothing
    loss = (1 - eps) * (lse - xc[torch.arange(N), tgt]) + eps * (lse - xc.mean(1)) + z_loss * lse ** 2
    grad = p * (1 + 2 * z_loss * lse[:, None]) - eps / V
    grad[torch.arange(N), tgt] -= 1.0
    if softcap:
        grad = grad * (1 - torch.tanh(x / softcap) ** 2)
    loss = loss * valid
    grad = grad * valid[:, None]
    if reduction == "none":
        out["loss"].copy_(loss)
        out["dlogits"].copy_(grad * grad_loss[:, None])
        return
    a = 1.0 / max(int(valid.sum()), 1) if reduction == "mean" else 1.0
    out["loss"].copy_(loss.sum() * a)
    out["dlogits"].copy_(grad * grad_loss * a)
