"""Attention backward port whose left window bound is exclusive, j > c - window_left,
one key fewer than the contract's j >= c - window_left."""

import torch


def _seen(Tq, Tk, b, h, seq_idx, attn_mask, causal, align, window_left, window_right):
    if attn_mask is not None:
        m = attn_mask[b, h if attn_mask.shape[1] > 1 else 0]
        return (m, None) if m.dtype == torch.bool else (torch.isfinite(m), m.float())
    c = torch.arange(Tq)[:, None] + (Tk - Tq if align == "bottom_right" else 0)
    j = torch.arange(Tk)[None, :]
    seen = torch.ones(Tq, Tk, dtype=torch.bool)
    if window_left >= 0:
        seen &= j > c - window_left
    if causal:
        seen &= j <= c
    elif window_right >= 0:
        seen &= j <= c + window_right
    if seq_idx is not None:
        s = seq_idx[b].long()
        seen &= (s[:, None] == s[None, :]) & (s[:, None] >= 0)
    return seen, None


def backward(*, q, k, v, o, lse, dout, seq_idx, attn_mask, dropout_mask, causal, align,
             window_left, window_right, softcap, scale, dropout, out):
    B, H, Tq, _ = q.shape
    Hkv, Tk = k.shape[1], k.shape[2]
    G = H // Hkv
    dq, dk, dv = torch.zeros(q.shape), torch.zeros(k.shape), torch.zeros(v.shape)
    for b in range(B):
        for h in range(H):
            qh, kh, vh, do = q[b, h].float(), k[b, h // G].float(), v[b, h // G].float(), dout[b, h].float()
            seen, bias = _seen(Tq, Tk, b, h, seq_idx, attn_mask, causal, align, window_left,
                               window_right)
            s0 = scale * qh @ kh.T
            s = softcap * torch.tanh(s0 / softcap) if softcap else s0
            if bias is not None:
                s = s + torch.where(seen, bias, 0.0)
            p = torch.softmax(s.masked_fill(~seen, float("-inf")), dim=-1).nan_to_num(0.0)
            z = dropout_mask[b, h].float() / (1 - dropout) if dropout > 0 else torch.ones_like(p)
            dv[b, h // G] += (p * z).T @ do
            dp = (do @ vh.T) * z
            ds = p * (dp - (p * dp).sum(-1, keepdim=True))
            if softcap:
                ds = ds * (1 - torch.tanh(s0 / softcap) ** 2)
            dq[b, h] = scale * ds @ kh
            dk[b, h // G] += scale * ds.T @ qh
    out["dq"].copy_(dq)
    out["dk"].copy_(dk)
    out["dv"].copy_(dv)
