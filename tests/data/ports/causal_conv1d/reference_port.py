"""A correct causal conv1d backward port (the control): the taps as shifted slices in
fp32, with the packed-sequence mask, states and the SiLU recompute."""

import torch


def backward(*, x, weight, bias, dout, seq_idx, initial_states, dfinal_states, activation,
             out):
    B, D, L = x.shape
    K = weight.shape[1]
    w = weight.float()
    init = initial_states.float() if initial_states is not None else x.new_zeros(
        B, D, K - 1, dtype=torch.float32)
    xc = torch.cat([init, x.float()], dim=-1)  # (B, D, L+K-1)
    if seq_idx is not None:
        s = seq_idx.long()
        state_id = s[:, :1] if initial_states is not None else torch.full_like(s[:, :1], -1)
        ids = torch.cat([state_id.expand(B, K - 1), s], dim=1)
        taps = [(ids[:, k:k + L] == s).float()[:, None] for k in range(K)]  # (B, 1, L)
    else:
        taps = [torch.ones(1, 1, L) for _ in range(K)]
    pre = sum(taps[k] * w[None, :, k, None] * xc[..., k:k + L] for k in range(K))
    if bias is not None:
        pre = pre + bias.float()[None, :, None]
    g = dout.float()
    if activation == "silu":
        s = torch.sigmoid(pre)
        g = g * s * (1 + pre * (1 - s))
    if seq_idx is not None:
        g = g * (seq_idx >= 0).float()[:, None]
    dxc = torch.zeros(B, D, L + K - 1)
    for k in range(K):
        dxc[..., k:k + L] += taps[k] * w[None, :, k, None] * g
    if dfinal_states is not None:
        dxc[..., L:] += dfinal_states.float()
    out["dx"].copy_(dxc[..., K - 1:])
    out["dweight"].copy_(torch.stack(
        [(taps[k] * g * xc[..., k:k + L]).sum((0, 2)) for k in range(K)], dim=1))
    if bias is not None:
        out["dbias"].copy_(g.sum((0, 2)))
    if initial_states is not None:
        out["dinitial_states"].copy_(dxc[..., :K - 1])
