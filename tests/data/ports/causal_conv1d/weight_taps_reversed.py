"""Causal conv1d backward port whose dx (the transposed convolution) takes the filter taps
in reverse order, w[K-1-k] for tap k, a correlation/convolution mix-up; dweight is right."""

import torch


def backward(*, x, weight, bias, dout, seq_idx, initial_states, dfinal_states, activation,
             out):
    B, D, L = x.shape
    K = weight.shape[1]
    w = weight.float()
    prev = initial_states.float() if initial_states is not None else torch.zeros(B, D, K - 1)
    xe = torch.cat([prev, x.float()], -1)
    if seq_idx is None:
        keep = [torch.ones(1, 1, L)] * K
    else:
        ids = torch.cat([(seq_idx[:, :1] if initial_states is not None
                          else torch.full_like(seq_idx[:, :1], -1)).expand(B, K - 1), seq_idx], 1)
        keep = [(ids[:, k:k + L] == seq_idx)[:, None].float() for k in range(K)]
    pre = sum(keep[k] * w[:, k, None] * xe[..., k:k + L] for k in range(K))
    if bias is not None:
        pre = pre + bias.float()[:, None]
    g = dout.float()
    if activation == "silu":
        sg = torch.sigmoid(pre)
        g = g * sg * (1 + pre * (1 - sg))
    if seq_idx is not None:
        g = g * (seq_idx >= 0)[:, None]
    dxe = torch.zeros(B, D, L + K - 1)
    for k in range(K):
        dxe[..., k:k + L] += keep[k] * w[:, K - 1 - k, None] * g
    if dfinal_states is not None:
        dxe[..., L:] += dfinal_states.float()
    out["dx"].copy_(dxe[..., K - 1:])
    out["dweight"].copy_(torch.stack([(keep[k] * g * xe[..., k:k + L]).sum((0, 2))
                                      for k in range(K)], 1))
    if bias is not None:
        out["dbias"].copy_(g.sum((0, 2)))
    if initial_states is not None:
        out["dinitial_states"].copy_(dxe[..., :K - 1])
