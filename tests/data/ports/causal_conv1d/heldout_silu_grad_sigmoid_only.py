"""Causal conv1d backward port (held out): the SiLU derivative is taken as sigmoid(pre)
alone, without its pre * s * (1 - s) part: g' = dout * s instead of dout * s (1 + pre (1 - s))."""

import torch


def backward(*, x, weight, bias, dout, seq_idx, initial_states, dfinal_states, activation,
             out):
    B, D, L = x.shape
    K = weight.shape[1]
    w = weight.float()
    init = (initial_states.float() if initial_states is not None
            else x.new_zeros(B, D, K - 1, dtype=torch.float32))
    xc = torch.cat([init, x.float()], dim=-1)
    if seq_idx is None:
        taps = xc.new_ones(1, L, K)
    else:
        pad = (seq_idx[:, :1].expand(B, K - 1) if initial_states is not None
               else seq_idx.new_full((B, K - 1), -1))
        ids = torch.cat([pad, seq_idx], dim=1)
        taps = (ids.unfold(1, K, 1) == seq_idx.unsqueeze(-1)).float()
    windows = xc.unfold(-1, K, 1)
    pre = (windows * taps.unsqueeze(1) * w[None, :, None, :]).sum(-1)
    if bias is not None:
        pre = pre + bias.float()[None, :, None]
    padding = None if seq_idx is None else (seq_idx < 0).unsqueeze(1)
    if padding is not None:
        pre = pre.masked_fill(padding, 0.0)
    g = dout.float()
    if activation == "silu":
        g = g * torch.sigmoid(pre)  # bug: * (1 + pre * (1 - s)) left out
    if padding is not None:
        g = g.masked_fill(padding, 0.0)
    dxc = xc.new_zeros(B, D, L + K - 1)
    for k in range(K):
        dxc[..., k:k + L] += taps[:, None, :, k] * w[None, :, k, None] * g
    if dfinal_states is not None:
        dxc[..., L:] += dfinal_states.float()
    out["dx"].copy_(dxc[..., K - 1:])
    out["dweight"].copy_((windows * taps.unsqueeze(1) * g.unsqueeze(-1)).sum((0, 2)))
    if bias is not None:
        out["dbias"].copy_(g.sum((0, 2)))
    if initial_states is not None:
        out["dinitial_states"].copy_(dxc[..., :K - 1])
