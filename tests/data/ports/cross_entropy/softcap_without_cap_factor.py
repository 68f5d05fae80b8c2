"""Cross entropy port that caps the logits as tanh(x / c), leaving out the factor c, in the
loss and the gradient (whose softcap derivative becomes (1 - tanh^2) / c)."""

import torch


def forward_backward(*, logits, targets, grad_loss, ignore_index, label_smoothing,
                     reduction, z_loss, softcap, shift, seq_len, out, **_trainer):
    N, V = logits.shape
    if shift:
        t = targets.reshape(-1, seq_len)
        s = torch.full_like(t, ignore_index)
        s[:, :-1] = t[:, 1:]
        targets = s.reshape(-1)
    valid = targets != ignore_index
    x = logits.double()
    xc = torch.tanh(x / softcap) if softcap else x
    lse = torch.logsumexp(xc, 1)
    p = (xc - lse[:, None]).exp()
    tgt = torch.where(valid, targets, 0)
    eps = label_smoothing
    loss = (1 - eps) * (lse - xc.gather(1, tgt[:, None])[:, 0]) + eps * (lse - xc.mean(1)) \
        + z_loss * lse * lse
    grad = p * (1 + 2 * z_loss * lse)[:, None] - eps / V
    grad.scatter_add_(1, tgt[:, None], torch.full((N, 1), eps - 1.0, dtype=grad.dtype))
    if softcap:
        grad = grad * (1 - xc ** 2) / softcap
    loss, grad = loss * valid, grad * valid[:, None]
    if reduction == "none":
        out["loss"].copy_(loss)
        out["dlogits"].copy_(grad * grad_loss[:, None])
    else:
        a = 1.0 / max(int(valid.sum()), 1) if reduction == "mean" else 1.0
        out["loss"].copy_(loss.sum() * a)
        out["dlogits"].copy_(grad * (grad_loss * a))
