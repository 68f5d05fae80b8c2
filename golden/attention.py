"""Scaled dot-product attention backward, closed form in float64 (no autograd).

Shapes are logical: q (B, H, Tq, d), k and v (B, Hkv, Tk, d) with H a multiple of Hkv
(grouped-query attention: query head h reads key/value head h // (H / Hkv)), dout like q.
Query i sees key j when every rule in force allows it:

    lo(i) <= j <= hi(i),  c(i) = i + off   (off = Tk - Tq bottom-right, 0 top-left)
    lo(i) = c(i) - window_left   (no bound when window_left = -1)
    hi(i) = c(i) if causal, else c(i) + window_right   (no bound when window_right = -1)
    seg[i] == seg[j] >= 0        (packing: seq_idx, -1 padding; Tq == Tk)
    mask[i, j]                   (an explicit boolean mask; an additive one: finite)

Forward, per (batch, query head), K and V that head's key/value head:

    S0 = scale Q K^T
    S  = c tanh(S0 / c) with softcap c > 0, else S0;  + bias (an additive mask)
    S  = -inf where not seen,  lse = logsumexp(S, -1),  P = exp(S - lse)
    Pd = P * Z / (1 - p) with dropout p and keep mask Z, else P;  O = Pd V

Backward, dO the upstream gradient of O:

    dV = Pd^T dO,  dP = (dO V^T) * Z / (1 - p),  D = rowsum(P * dP),  dS = P * (dP - D)
    dS0 = dS * (1 - tanh^2(S0 / c)) with softcap, else dS
    dQ = scale dS0 K,  dK = scale dS0^T Q

and dK, dV of a key/value head are the sums over the query heads that read it. A query
that sees nothing has P = 0: O = 0, dQ = 0 and lse = -inf, and keys seen by nobody get
dK = dV = 0 (PyTorch's math path gave NaN for such rows before 2.5).

D equals rowsum(dO * O) (what kernels compute from the saved O); the golden takes the
form over P, which cancels exactly where a query sees one key (its dQ, and dK of a
sequence of one, are 0, not float64 noise that would set the error's scale).

Everything runs over blocks of query rows per (batch, head) (`block_rows`): a long
sequence never holds more than a block's rows x Tk scores at once.

The truth is computed from the q, k, v, dout and masks the kernel receives (converted to
float64 exactly); the saved O and lse a kernel is handed are this forward rounded.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

ROWS = 512  # query rows a block at most
BLOCK_ELEMS = 1 << 22  # scores a block at most (32 MB a float64 temporary)
F64 = torch.float64


def block_rows(seq_k: int) -> int:
    """Query rows a block: ROWS, fewer where the keys are so many that a block would
    pass BLOCK_ELEMS scores."""
    return max(1, min(ROWS, BLOCK_ELEMS // max(1, seq_k)))


def bounds(seq_q: int, seq_k: int, causal: bool, align: str, window: tuple,
           rows: tuple, device) -> tuple[Tensor, Tensor]:
    """(lo, hi) int64 of the query rows (r0, r1): the keys lo..hi (inclusive, clipped to
    0..Tk-1; empty when lo > hi) that the alignment, causality and window allow."""
    left, right = window
    c = torch.arange(*rows, device=device, dtype=torch.int64)
    if align == "bottom_right":
        c = c + (seq_k - seq_q)
    lo = c - left if left >= 0 else torch.zeros_like(c)
    hi = c if causal else c + right if right >= 0 else torch.full_like(c, seq_k - 1)
    return lo.clamp_min(0), hi.clamp_max(seq_k - 1)


def visible(seq_idx: Optional[Tensor], seq_q: int, seq_k: int, causal: bool, device, *,
            align: str = "top_left", window: tuple = (-1, -1), rows: Optional[tuple] = None
            ) -> Tensor:
    """(B or 1, 1, rows, Tk) bool: query i (of rows, default all) sees key j by the rules
    of the case's attributes and packing (the explicit mask apart)."""
    rows = rows or (0, seq_q)
    lo, hi = bounds(seq_q, seq_k, causal, align, window, rows, device)
    j = torch.arange(seq_k, device=device)
    m = ((j >= lo[:, None]) & (j <= hi[:, None]))[None, None]
    if seq_idx is not None:
        s = seq_idx.to(device=device, dtype=torch.int64)
        sq = s[:, rows[0]:rows[1]]
        same = (sq[:, None, :, None] == s[:, None, None, :]) & (sq[:, None, :, None] >= 0)
        m = m & same
    return m


class _Case:
    """One call's tensors and attributes, sliced per (batch, head, query block)."""

    def __init__(self, q, k, v, scale, causal, seq_idx, align, window, softcap, attn_mask,
                 dropout_mask, dropout, block):
        self.q, self.k, self.v = (t.to(F64) for t in (q, k, v))
        B, H, self.Tq, _ = q.shape
        self.Tk = k.shape[2]
        self.G = H // k.shape[1]
        self.scale, self.causal, self.seq_idx = scale, causal, seq_idx
        self.align, self.window, self.softcap = align, tuple(window), softcap
        self.mask, self.drop_keep, self.dropout = attn_mask, dropout_mask, dropout
        self.rows = block or block_rows(self.Tk)

    def blocks(self):
        for r0 in range(0, self.Tq, self.rows):
            yield r0, min(self.Tq, r0 + self.rows)

    def seen(self, b: int, h: int, r0: int, r1: int):
        """(visible (n, Tk) bool, bias (n, Tk) float64 or None) of one block."""
        seg = None if self.seq_idx is None else self.seq_idx[b:b + 1]
        m = visible(seg, self.Tq, self.Tk, self.causal, self.q.device, align=self.align,
                    window=self.window, rows=(r0, r1))[0, 0]
        bias = None
        if self.mask is not None:
            x = self.mask[b, h if self.mask.shape[1] > 1 else 0, r0:r1]
            if x.dtype == torch.bool:
                m = m & x
            else:
                bias = x.to(F64)
                m = m & torch.isfinite(bias)
        return m, bias

    def probs(self, b: int, h: int, r0: int, r1: int):
        """P (n, Tk), the softcap's tanh (or None), lse (n) and the dropout factor
        Z / (1 - p) (or None) of one block."""
        s = (self.q[b, h, r0:r1] @ self.k[b, h // self.G].transpose(-1, -2)) * self.scale
        t = None
        if self.softcap > 0:
            t = torch.tanh(s / self.softcap)
            s = self.softcap * t
        m, bias = self.seen(b, h, r0, r1)
        if bias is not None:
            s = s + torch.where(m, bias, 0.0)
        s = s.masked_fill(~m, float("-inf"))
        lse = torch.logsumexp(s, dim=-1, keepdim=True)
        p = torch.where(m, torch.exp(s - lse.clamp_min(torch.finfo(F64).min)), 0.0)
        z = None
        if self.dropout > 0:
            z = self.drop_keep[b, h, r0:r1].to(F64) / (1.0 - self.dropout)
        return p, t, lse.squeeze(-1), z


def _case(q, k, v, scale, causal, seq_idx, align, window, softcap, attn_mask,
          dropout_mask, dropout, block) -> _Case:
    if dropout > 0 and dropout_mask is None:
        raise ValueError("dropout > 0 needs its keep mask (dropout_mask)")
    return _Case(q, k, v, scale, causal, seq_idx, align, window, softcap, attn_mask,
                 dropout_mask, dropout, block)


def forward(q: Tensor, k: Tensor, v: Tensor, scale: float, causal: bool,
            seq_idx: Optional[Tensor] = None, *, align: str = "top_left",
            window: tuple = (-1, -1), softcap: float = 0.0,
            attn_mask: Optional[Tensor] = None, dropout_mask: Optional[Tensor] = None,
            dropout: float = 0.0, block: Optional[int] = None) -> tuple[Tensor, Tensor]:
    """(O like q, lse (B, H, Tq)) in float64; lse is that of the scores before dropout."""
    c = _case(q, k, v, scale, causal, seq_idx, align, window, softcap, attn_mask,
              dropout_mask, dropout, block)
    B, H = q.shape[:2]
    o = torch.empty_like(c.q)
    lse = torch.empty((B, H, c.Tq), dtype=F64, device=c.q.device)
    for b in range(B):
        for h in range(H):
            vh = c.v[b, h // c.G]
            for r0, r1 in c.blocks():
                p, _, lse[b, h, r0:r1], z = c.probs(b, h, r0, r1)
                o[b, h, r0:r1] = (p if z is None else p * z) @ vh
    return o, lse


def backward(q: Tensor, k: Tensor, v: Tensor, dout: Tensor, scale: float, causal: bool,
             seq_idx: Optional[Tensor] = None, o: Optional[Tensor] = None, *,
             align: str = "top_left", window: tuple = (-1, -1), softcap: float = 0.0,
             attn_mask: Optional[Tensor] = None, dropout_mask: Optional[Tensor] = None,
             dropout: float = 0.0, block: Optional[int] = None) -> dict:
    """{"dq", "dk", "dv"} in float64, one (batch, head, block of query rows) at a time.
    With `o` (the saved forward output as a kernel receives it), D = rowsum(dO * o) from
    it: FlashAttention's convention, which differs from the exact gradient by the rounding
    of o."""
    c = _case(q, k, v, scale, causal, seq_idx, align, window, softcap, attn_mask,
              dropout_mask, dropout, block)
    dout = dout.to(F64)
    B, H = q.shape[:2]
    dq = torch.zeros_like(c.q)
    dk = torch.zeros_like(c.k)
    dv = torch.zeros_like(c.v)
    for b in range(B):
        for h in range(H):
            g = h // c.G
            kh, vh = c.k[b, g], c.v[b, g]
            for r0, r1 in c.blocks():
                p, t, _, z = c.probs(b, h, r0, r1)
                do = dout[b, h, r0:r1]
                dv[b, g] += (p if z is None else p * z).transpose(-1, -2) @ do
                dp = do @ vh.transpose(-1, -2)
                if z is not None:
                    dp = dp * z
                d = (p * dp).sum(-1, keepdim=True) if o is None else \
                    (do * o[b, h, r0:r1].to(F64)).sum(-1, keepdim=True)
                ds = p * (dp - d)
                if t is not None:
                    ds = ds * (1.0 - t * t)
                dq[b, h, r0:r1] = scale * (ds @ kh)
                dk[b, g] += scale * (ds.transpose(-1, -2) @ c.q[b, h, r0:r1])
    return {"dq": dq, "dk": dk, "dv": dv}


def terms(q: Tensor, k: Tensor, v: Tensor, dout: Tensor, scale: float, causal: bool,
          seq_idx: Optional[Tensor] = None, *, align: str = "top_left",
          window: tuple = (-1, -1), softcap: float = 0.0,
          attn_mask: Optional[Tensor] = None, dropout_mask: Optional[Tensor] = None,
          dropout: float = 0.0, block: Optional[int] = None) -> dict:
    """The named terms of each gradient, whose sum is `backward`'s (float64): dq and dk
    from dS = P * (dP - D) split into its dP part ("dp": P * dP) and its D part ("d":
    -P * D), each through the softcap derivative; "softcap" is that derivative's share
    (1 - tanh^2 - 1 of dS), dv is one term ("dv": Pd^T dO). A backward that forgets a
    term is off by -1 x it (D missing: -1 x "d")."""
    c = _case(q, k, v, scale, causal, seq_idx, align, window, softcap, attn_mask,
              dropout_mask, dropout, block)
    dout = dout.to(F64)
    B, H = q.shape[:2]
    names = ("dp", "d") + (("softcap",) if softcap > 0 else ())
    dq = {n: torch.zeros_like(c.q) for n in names}
    dk = {n: torch.zeros_like(c.k) for n in names}
    dv = torch.zeros_like(c.v)
    for b in range(B):
        for h in range(H):
            g = h // c.G
            kh, vh = c.k[b, g], c.v[b, g]
            for r0, r1 in c.blocks():
                p, t, _, z = c.probs(b, h, r0, r1)
                do = dout[b, h, r0:r1]
                dv[b, g] += (p if z is None else p * z).transpose(-1, -2) @ do
                dp = do @ vh.transpose(-1, -2)
                if z is not None:
                    dp = dp * z
                d = (p * dp).sum(-1, keepdim=True)
                cap = 1.0 if t is None else 1.0 - t * t
                parts = {"dp": p * dp * cap, "d": -p * d * cap}
                if t is not None:
                    parts["softcap"] = -p * (dp - d) * t * t
                for n, ds in parts.items():
                    dq[n][b, h, r0:r1] = scale * (ds @ kh)
                    dk[n][b, g] += scale * (ds.transpose(-1, -2) @ c.q[b, h, r0:r1])
    return {"dq": dq, "dk": dk, "dv": {"dv": dv}}
