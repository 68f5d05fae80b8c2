"""Scaled dot-product attention backward, closed form in float64 (no autograd).

Shapes are logical: q (B, H, T, d), k and v (B, Hkv, T, d) with H a multiple of Hkv
(grouped-query attention: query head h reads key/value head h // (H / Hkv)), dout like q.
Query i sees key j when the mask allows it:

    visible(i, j) = seg[i] == seg[j] >= 0  and  (not causal or j <= i)

with seg the per-token segment id of packed sequences (seq_idx; -1 marks padding, which
sees and is seen by nothing), or every token in one segment without packing.

Forward, per (batch, query head), K and V that head's key/value head:

    S = scale Q K^T (masked: -inf),  lse = logsumexp(S, -1),  P = exp(S - lse),  O = P V

Backward, dO the upstream gradient of O:

    dV = P^T dO,  dP = dO V^T,  D = rowsum(P * dP),  dS = P * (dP - D)
    dQ = scale dS K,  dK = scale dS^T Q

and dK, dV of a key/value head are the sums over the query heads that read it. A query
that sees nothing (a padding token) has P = 0: O = 0, dQ = 0 and lse = -inf, and keys
seen by nobody get dK = dV = 0 (PyTorch's math path gave NaN for such rows before 2.5).

D equals rowsum(dO * O) (what kernels compute from the saved O); the golden takes the
form over P, which cancels exactly where a query sees one key (its dQ, and dK of a
sequence of one, are 0, not float64 noise that would set the error's scale).

The truth is computed from the q, k, v and dout the kernel receives (converted to float64
exactly); the saved O and lse a kernel is handed are this forward rounded.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor


def visible(seg: Optional[Tensor], T: int, causal: bool, device) -> Tensor:
    """(B or 1, 1, T, T) bool: query i sees key j."""
    m = torch.ones((1, 1, T, T), dtype=torch.bool, device=device)
    if causal:
        m = torch.tril(m)
    if seg is not None:
        s = seg.to(torch.int64)
        same = (s[:, None, :, None] == s[:, None, None, :]) & (s[:, None, :, None] >= 0)
        m = m & same
    return m


def _head(q, k, v, m, scale):
    """P (T, T) and O (T, d) of one head in float64; rows that see nothing are 0."""
    s = (q @ k.transpose(-1, -2)) * scale
    s = s.masked_fill(~m, float("-inf"))
    lse = torch.logsumexp(s, dim=-1, keepdim=True)
    p = torch.where(m, torch.exp(s - lse.clamp_min(torch.finfo(torch.float64).min)), 0.0)
    return p, p @ v, lse.squeeze(-1)


def forward(q: Tensor, k: Tensor, v: Tensor, scale: float, causal: bool,
            seq_idx: Optional[Tensor] = None) -> tuple[Tensor, Tensor]:
    """(O like q, lse (B, H, T)) in float64."""
    q, k, v = (t.to(torch.float64) for t in (q, k, v))
    B, H, T, _ = q.shape
    G = H // k.shape[1]
    m = visible(seq_idx, T, causal, q.device)
    o = torch.empty_like(q)
    lse = torch.empty((B, H, T), dtype=torch.float64, device=q.device)
    for b in range(B):
        mb = m[min(b, m.shape[0] - 1), 0]
        for h in range(H):
            _, o[b, h], lse[b, h] = _head(q[b, h], k[b, h // G], v[b, h // G], mb, scale)
    return o, lse


def backward(q: Tensor, k: Tensor, v: Tensor, dout: Tensor, scale: float, causal: bool,
             seq_idx: Optional[Tensor] = None, o: Optional[Tensor] = None) -> dict:
    """{"dq", "dk", "dv"} in float64, one (batch, head) at a time (a T x T float64 score
    matrix per head, not per batch). With `o` (the saved forward output as a kernel
    receives it), D = rowsum(dO * o) from it: FlashAttention's convention, which differs
    from the exact gradient by the rounding of o."""
    q, k, v, dout = (t.to(torch.float64) for t in (q, k, v, dout))
    B, H, T, _ = q.shape
    G = H // k.shape[1]
    m = visible(seq_idx, T, causal, q.device)
    dq = torch.zeros_like(q)
    dk = torch.zeros_like(k)
    dv = torch.zeros_like(v)
    for b in range(B):
        mb = m[min(b, m.shape[0] - 1), 0]
        for h in range(H):
            kh, vh, do = k[b, h // G], v[b, h // G], dout[b, h]
            p, _, _ = _head(q[b, h], kh, vh, mb, scale)
            dv[b, h // G] += p.transpose(-1, -2) @ do
            dp = do @ vh.transpose(-1, -2)
            d = (p * dp).sum(-1, keepdim=True) if o is None else \
                (do * o[b, h].to(torch.float64)).sum(-1, keepdim=True)
            ds = p * (dp - d)
            dq[b, h] = scale * (ds @ kh)
            dk[b, h // G] += scale * (ds.transpose(-1, -2) @ q[b, h])
    return {"dq": dq, "dk": dk, "dv": dv}
