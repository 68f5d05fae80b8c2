"""Causal conv1d backward port that accumulates dweight and dbias over time in x's dtype:
each 8-step chunk's partial (summed over the batch) is fp32, the running total across
chunks is rounded to x's dtype after every add (a 16-bit accumulator)."""

import torch

CHUNK = 8


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
        first = seq_idx[:, :1] if initial_states is not None else torch.full_like(seq_idx[:, :1], -1)
        ids = torch.cat([first.expand(B, K - 1), seq_idx], 1)
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
        dxe[..., k:k + L] += keep[k] * w[:, k, None] * g
    if dfinal_states is not None:
        dxe[..., L:] += dfinal_states.float()
    out["dx"].copy_(dxe[..., K - 1:])
    terms = torch.stack([keep[k] * g * xe[..., k:k + L] for k in range(K)], -1)  # (B, D, L, K)
    dw = torch.zeros(D, K, dtype=x.dtype)
    db = torch.zeros(D, dtype=x.dtype)
    for t in range(0, L, CHUNK):
        dw = (dw.float() + terms[:, :, t:t + CHUNK].sum((0, 2))).to(x.dtype)
        db = (db.float() + g[:, :, t:t + CHUNK].sum((0, 2))).to(x.dtype)
    out["dweight"].copy_(dw)
    if bias is not None:
        out["dbias"].copy_(db)
    if initial_states is not None:
        out["dinitial_states"].copy_(dxe[..., :K - 1])
