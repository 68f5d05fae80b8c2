"""Attention backward, from docs/ops/attention.md; planted bug: a window side of 0 is read as no bound (the tests are > 0, not >= 0): window_left = 0 or window_right = 0 sees every key on that side."""

import torch


def backward(*, q, k, v, o, lse, dout, seq_idx, attn_mask, dropout_mask, causal, align,
             window_left, window_right, softcap, scale, dropout, out):
    B, H, Tq, d = q.shape
    Hkv, Tk = k.shape[1], k.shape[2]
    G = H // Hkv
    qf, kf, vf, dof = (t.double() for t in (q, k, v, dout))
    i = torch.arange(Tq)[:, None]
    j = torch.arange(Tk)[None, :]
    c = i + (Tk - Tq if align == "bottom_right" else 0)
    rule = torch.ones(Tq, Tk, dtype=torch.bool)
    if window_left > 0:
        rule &= j >= c - window_left
    if causal:
        rule &= j <= c
    elif window_right > 0:
        rule &= j <= c + window_right
    dq = torch.zeros_like(qf)
    dk = torch.zeros_like(kf)
    dv = torch.zeros_like(vf)
    for b in range(B):
        seen_b = rule
        if seq_idx is not None:
            s = seq_idx[b].long()
            seen_b = seen_b & (s[:, None] == s[None, :]) & (s[:, None] >= 0)
        for h in range(H):
            g = h // G
            seen = seen_b
            s0 = scale * qf[b, h] @ kf[b, g].T
            sc = softcap * torch.tanh(s0 / softcap) if softcap > 0 else s0
            if attn_mask is not None:
                m = attn_mask[b, h if attn_mask.shape[1] > 1 else 0]
                if m.dtype == torch.bool:
                    seen = seen & m
                else:
                    bias = m.double()
                    seen = seen & torch.isfinite(bias)
                    sc = sc + torch.where(seen, bias, 0.0)
            sc = sc.masked_fill(~seen, float("-inf"))
            mx = sc.max(dim=-1, keepdim=True).values
            mx = torch.where(torch.isfinite(mx), mx, 0.0)
            e = torch.where(seen, torch.exp(sc - mx), 0.0)
            den = e.sum(-1, keepdim=True)
            p = torch.where(den > 0, e / den.clamp_min(1e-300), 0.0)
            z = dropout_mask[b, h].double() / (1 - dropout) if dropout > 0 else None
            pd = p * z if z is not None else p
            do = dof[b, h]
            dv[b, g] += pd.T @ do
            dp = do @ vf[b, g].T
            if z is not None:
                dp = dp * z
            D = (p * dp).sum(-1, keepdim=True)
            ds = p * (dp - D)
            if softcap > 0:
                ds = ds * (1 - torch.tanh(s0 / softcap) ** 2)
            dq[b, h] = scale * ds @ kf[b, g]
            dk[b, g] += scale * ds.T @ qf[b, h]
    out["dq"].copy_(dq)
    out["dk"].copy_(dk)
    out["dv"].copy_(dv)
