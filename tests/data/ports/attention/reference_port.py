"""A correct attention backward port (the control): the scores materialised per (batch,
head) in fp32, the visibility from the attributes or the explicit mask, D = rowsum(P dP)."""

import torch


def visibility(Tq, Tk, b, h, *, seq_idx, attn_mask, causal, align, window_left,
               window_right):
    """(Tq, Tk) bool seen and the additive bias (or None) of batch row b, query head h."""
    if attn_mask is not None:
        m = attn_mask[b, h if attn_mask.shape[1] > 1 else 0]
        if m.dtype == torch.bool:
            return m, None
        bias = m.float()
        return torch.isfinite(bias), bias
    i = torch.arange(Tq)[:, None]
    j = torch.arange(Tk)[None, :]
    c = i + (Tk - Tq if align == "bottom_right" else 0)
    seen = torch.ones(Tq, Tk, dtype=torch.bool)
    if window_left >= 0:
        seen &= j >= c - window_left
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
    dq = torch.zeros(q.shape)
    dk = torch.zeros(k.shape)
    dv = torch.zeros(v.shape)
    for b in range(B):
        for h in range(H):
            qh, kh, vh = q[b, h].float(), k[b, h // G].float(), v[b, h // G].float()
            do = dout[b, h].float()
            seen, bias = visibility(Tq, Tk, b, h, seq_idx=seq_idx, attn_mask=attn_mask,
                                    causal=causal, align=align, window_left=window_left,
                                    window_right=window_right)
            s0 = scale * qh @ kh.T
            s = softcap * torch.tanh(s0 / softcap) if softcap else s0
            if bias is not None:
                s = s + torch.where(seen, bias, 0.0)
            s = s.masked_fill(~seen, float("-inf"))
            m = s.max(dim=-1, keepdim=True).values.clamp_min(-1e30)
            e = torch.exp(s - m)
            p = e / e.sum(dim=-1, keepdim=True).clamp_min(1e-30)
            z = dropout_mask[b, h].float() / (1 - dropout) if dropout > 0 else None
            pd = p * z if z is not None else p
            dv[b, h // G] += pd.T @ do
            dp = do @ vh.T
            if z is not None:
                dp = dp * z
            d = (p * dp).sum(dim=-1, keepdim=True)
            ds = p * (dp - d)
            if softcap:
                ds = ds * (1 - torch.tanh(s0 / softcap) ** 2)
            dq[b, h] = scale * ds @ kh
            dk[b, h // G] += scale * ds.T @ qh
    out["dq"].copy_(dq)
    out["dk"].copy_(dk)
    out["dv"].copy_(dv)
