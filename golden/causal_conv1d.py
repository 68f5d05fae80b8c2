"""Causal depthwise conv1d, forward and backward, closed form in float64.

Dao's causal-conv1d semantics (1.7.0), written from the math, no autograd:

    xc  = concat(initial_states or zeros, x) along time          (B, D, L+K-1)
    id  = seq_idx, and for the K-1 state slots: seq_idx[:, 0] with initial states, else -1
    M[b,t,k] = id_c[b, t+k] == seq_idx[b, t]                    (all ones without seq_idx)
    pre[b,d,t] = bias[d] + sum_k M w[d,k] xc[b,d,t+k];  pre = 0 where seq_idx < 0
    out = silu(pre) or pre;  final_states[..., j] = xc[..., L+j]

Backward, with g = dout and dF = dfinal_states:

    g'  = g * silu'(pre) (or g), and 0 at padding positions (seq_idx < 0)
    dxc[b,d,t+k] += M w[d,k] g'[b,d,t];  dxc[..., L:L+K-1] += dF    (dF is a pure copy path)
    dx = dxc[..., K-1:];  dinitial_states = dxc[..., :K-1]
    dweight[d,k] = sum_{b,t} M g' xc[t+k];  dbias[d] = sum_{b,t} g'

w[d, K-1] multiplies the current token: out[t] = sum_k w[k] x[t-(K-1-k)], the convention
of F.conv1d(x, w.unsqueeze(1), padding=K-1, groups=D)[..., :L].
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor


def _extended(x: Tensor, initial_states: Optional[Tensor], K: int) -> Tensor:
    B, D, L = x.shape
    init = initial_states if initial_states is not None else x.new_zeros(B, D, K - 1)
    return torch.cat([init, x], dim=-1)


def _tap_mask(seq_idx: Optional[Tensor], has_init: bool, K: int, like: Tensor) -> Tensor:
    """M[b, t, k]: may output t read the input at extended position t+k."""
    B, _, L = like.shape
    if seq_idx is None:
        return like.new_ones(1, L, K)
    pad = seq_idx[:, :1].expand(B, K - 1) if has_init else seq_idx.new_full((B, K - 1), -1)
    ids = torch.cat([pad, seq_idx], dim=1)  # (B, L+K-1)
    windows = ids.unfold(1, K, 1)  # (B, L, K): windows[b, t, k] = ids[b, t+k]
    return (windows == seq_idx.unsqueeze(-1)).to(like.dtype)


def _preactivation(xc, weight, bias, mask, seq_idx):
    K = weight.shape[1]
    windows = xc.unfold(-1, K, 1)  # (B, D, L, K)
    pre = (windows * mask.unsqueeze(1) * weight[None, :, None, :]).sum(-1)
    if bias is not None:
        pre = pre + bias[None, :, None]
    if seq_idx is not None:
        pre = pre.masked_fill((seq_idx < 0).unsqueeze(1), 0.0)
    return pre, windows


def forward(x, weight, bias=None, seq_idx=None, initial_states=None, activation=None):
    """(out, final_states) in float64, for the self-checks against autograd."""
    K = weight.shape[1]
    xc = _extended(x, initial_states, K)
    mask = _tap_mask(seq_idx, initial_states is not None, K, x)
    pre, _ = _preactivation(xc, weight, bias, mask, seq_idx)
    out = pre * torch.sigmoid(pre) if activation == "silu" else pre
    return out, xc[..., x.shape[-1]:]


def backward(x: Tensor, weight: Tensor, dout: Tensor, bias: Optional[Tensor] = None,
             seq_idx: Optional[Tensor] = None, initial_states: Optional[Tensor] = None,
             dfinal_states: Optional[Tensor] = None, activation: Optional[str] = None) -> dict:
    """dx, dweight, dbias (with bias), dinitial_states (with initial_states), in float64."""
    B, D, L = x.shape
    K = weight.shape[1]
    xc = _extended(x, initial_states, K)
    mask = _tap_mask(seq_idx, initial_states is not None, K, x)
    pre, windows = _preactivation(xc, weight, bias, mask, seq_idx)

    g = dout
    if activation == "silu":
        s = torch.sigmoid(pre)
        g = g * s * (1 + pre * (1 - s))
    if seq_idx is not None:
        g = g.masked_fill((seq_idx < 0).unsqueeze(1), 0.0)

    dxc = x.new_zeros(B, D, L + K - 1)
    for k in range(K):
        dxc[..., k:k + L] += mask[:, None, :, k] * weight[None, :, k, None] * g
    if dfinal_states is not None:
        dxc[..., L:] += dfinal_states
    grads = {
        "dx": dxc[..., K - 1:],
        "dweight": (windows * mask.unsqueeze(1) * g.unsqueeze(-1)).sum((0, 2)),
    }
    if bias is not None:
        grads["dbias"] = g.sum((0, 2))
    if initial_states is not None:
        grads["dinitial_states"] = dxc[..., :K - 1]
    return grads


def terms(x: Tensor, weight: Tensor, dout: Tensor, bias: Optional[Tensor] = None,
          seq_idx: Optional[Tensor] = None, initial_states: Optional[Tensor] = None,
          dfinal_states: Optional[Tensor] = None, activation: Optional[str] = None) -> dict:
    """The named terms of each gradient (float64): dx and dinitial_states = "taps" (the
    products w * g' over the taps) + "state" (the dfinal_states copy path); dweight and
    dbias are one term each; "silu" is the SiLU derivative's share of every output (the
    gradient minus the same with g' = g). A backward that forgets a term is off by -1 x
    it."""
    full = backward(x, weight, dout, bias, seq_idx, initial_states, dfinal_states, activation)
    taps = backward(x, weight, dout, bias, seq_idx, initial_states, None, activation)
    K = weight.shape[1]
    found = {"dx": {"taps": taps["dx"]}, "dweight": {"dweight": full["dweight"]}}
    if dfinal_states is not None:
        found["dx"]["state"] = full["dx"] - taps["dx"]
    if bias is not None:
        found["dbias"] = {"dbias": full["dbias"]}
    if initial_states is not None:
        found["dinitial_states"] = {"taps": taps["dinitial_states"]}
        if dfinal_states is not None:
            found["dinitial_states"]["state"] = full["dinitial_states"] - \
                taps["dinitial_states"]
    if activation == "silu":
        # the same backward with g' = g: the pre-activation's derivative left out
        plain = _backward_plain_g(x, weight, dout, bias, seq_idx, initial_states, K)
        for o, share in plain.items():
            if o in found:
                found[o]["silu"] = (taps[o] if o in taps else full[o]) - share
    return found


def _backward_plain_g(x, weight, dout, bias, seq_idx, initial_states, K) -> dict:
    """The tap products of `backward` with g' = dout (padding still zeroed)."""
    B, D, L = x.shape
    xc = _extended(x, initial_states, K)
    mask = _tap_mask(seq_idx, initial_states is not None, K, x)
    _, windows = _preactivation(xc, weight, bias, mask, seq_idx)
    g = dout if seq_idx is None else dout.masked_fill((seq_idx < 0).unsqueeze(1), 0.0)
    dxc = x.new_zeros(B, D, L + K - 1)
    for k in range(K):
        dxc[..., k:k + L] += mask[:, None, :, k] * weight[None, :, k, None] * g
    found = {"dx": dxc[..., K - 1:],
             "dweight": (windows * mask.unsqueeze(1) * g.unsqueeze(-1)).sum((0, 2))}
    if bias is not None:
        found["dbias"] = g.sum((0, 2))
    if initial_states is not None:
        found["dinitial_states"] = dxc[..., :K - 1]
    return found
