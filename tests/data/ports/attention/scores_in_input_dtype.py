"""Attention backward port that forms the scores S = scale * Q K^T in the input dtype (no
fp32 accumulation cast) before the softmax in fp32; the rest is fp32."""

import torch

from .reference_port import visibility


def backward(*, q, k, v, o, lse, dout, seq_idx, attn_mask, dropout_mask, causal, align,
             window_left, window_right, softcap, scale, dropout, out):
    B, H, Tq, _ = q.shape
    Hkv, Tk = k.shape[1], k.shape[2]
    G = H // Hkv
    dq, dk, dv = torch.zeros(q.shape), torch.zeros(k.shape), torch.zeros(v.shape)
    for b in range(B):
        for h in range(H):
            kh16 = k[b, h // G]
            qh, kh, vh, do = q[b, h].float(), kh16.float(), v[b, h // G].float(), dout[b, h].float()
            seen, bias = visibility(Tq, Tk, b, h, seq_idx=seq_idx, attn_mask=attn_mask,
                                    causal=causal, align=align, window_left=window_left,
                                    window_right=window_right)
            s0 = ((q[b, h] @ kh16.T) * scale).float()
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
