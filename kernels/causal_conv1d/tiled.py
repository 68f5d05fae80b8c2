"""A tiled model of a CUDA causal conv1d backward, in PyTorch.

It mirrors the structure of Dao's channel-last kernel: time tiles of T steps, each
reading a right halo of K-1 upstream gradients (and, with SiLU, the inputs needed to
recompute their pre-activations), owning the dweight/dbias contributions of its own
outputs only, adding the dfinal_states copy path into dx, and computing dinitial_states in
the first tile. Arithmetic is fp32 with one rounding at the store; dweight and dbias are
per-tile partials summed in a fixed order, so the result is bitwise reproducible.

`Bug` lists the deliberate defects the mutants in kernels/mutants/ plant in this model,
each a one-line change in the place a real port gets it wrong. With no bugs every branch
below takes the unmutated path, whose arithmetic is unchanged by the bug switches.
"""

from __future__ import annotations

import enum
from typing import FrozenSet

import torch

from bwd_suite.suite.registry import implementation

TILE = 64


class Bug(enum.Enum):
    NO_RIGHT_HALO = "the K-1 gradients right of the tile are read as zeros"
    HALO_IN_DWEIGHT = "the halo outputs are also counted in this tile's dweight"
    NO_DFINAL = "the dfinal_states copy path into dx and dinitial_states is missing"
    MASK_IGNORED_IN_DX = "the dx gather ignores seq_idx, so taps cross packed boundaries"
    SILU_NO_BIAS = "the SiLU pre-activation is recomputed without the bias"
    SILU_WRONG_DERIVATIVE = "SiLU's derivative is taken as sigmoid(pre), dropping pre*s*(1-s)"
    SILU_NO_INPUT_HALO = ("the recompute reads the inputs right of the tile as zeros (only "
                          "the forward's left halo is loaded), so the halo outputs' "
                          "pre-activations are wrong")
    DFINAL_TIMES_WEIGHT = "dfinal_states enters dx multiplied by the current-token weight"
    DFINAL_TIMES_SILU_GRAD = "dfinal_states enters dx multiplied by SiLU's derivative"
    SHORT_SEQ_NO_STATE = ("with L < K-1 the dfinal_states contributions (to dx and to "
                          "dinitial_states) are dropped: the state code assumes L >= K-1")
    DINIT_NO_DFINAL = ("dinitial_states misses the dfinal_states pass-through of the state "
                       "slots that survive into final_states (i >= L when L < K-1)")
    MASK_SOURCE_ID = ("the dx gather takes the mask row of the source position p, comparing "
                      "id[p-j] with id[p], instead of the target output p+j's row")
    DWEIGHT_NO_MASK = "dweight ignores seq_idx: taps across packed boundaries are summed"
    PADDING_NOT_MASKED = "upstream gradients at padding positions (seq_idx < 0) are not zeroed"
    DWEIGHT_BATCH0_ONLY = "the dweight reduction keeps batch 0 only (later batches are lost)"
    TAIL_NOT_ZEROED = ("gradients past the sequence end are clamped loads of the last step "
                       "instead of zeros")
    CL_TAIL_DWEIGHT = ("channel-last: the dweight of the last, partial vector of 8 channels "
                       "is dropped by the vectorised reduction")


def _ids_extended(seq_idx, has_init, K, B, L, device):
    """Sequence id per extended position (K-1 state slots, then L steps)."""
    if seq_idx is None:
        return None
    pad = seq_idx[:, :1].expand(B, K - 1) if has_init else seq_idx.new_full((B, K - 1), -1)
    return torch.cat([pad, seq_idx], dim=1)


def backward_tiled(x, weight, bias, dout, seq_idx, initial_states, dfinal_states,
                   activation, out, tile: int = TILE, bugs: FrozenSet[Bug] = frozenset()):
    B, D, L = x.shape
    K = weight.shape[1]
    H = K - 1
    f32 = torch.float32
    w = weight.float()
    b = bias.float() if bias is not None else None
    init = initial_states.float() if initial_states is not None else x.new_zeros(B, D, H, dtype=f32)
    # extended input: H state slots, L steps, H zeros past the end (for the halo recompute)
    xc = torch.cat([init, x.float(), x.new_zeros(B, D, H, dtype=f32)], dim=-1)
    ids = _ids_extended(seq_idx, initial_states is not None, K, B, L, x.device)
    if ids is not None:
        ids = torch.cat([ids, ids.new_full((B, H), -1)], dim=1)
    past_end = dout.new_zeros(B, D, H, dtype=f32)
    if Bug.TAIL_NOT_ZEROED in bugs:
        past_end = dout[..., -1:].float().expand(B, D, H)
    g_full = torch.cat([dout.float(), past_end], dim=-1)
    dF = dfinal_states.float() if dfinal_states is not None and Bug.NO_DFINAL not in bugs else None
    if Bug.SHORT_SEQ_NO_STATE in bugs and L < H:
        dF = None

    dx = torch.empty(B, D, L, dtype=f32, device=x.device)
    dinit = None
    dw_parts, db_parts = [], []
    for a in range(0, L, tile):
        e = min(a + tile, L)
        n = e - a
        # outputs t in [a, e + H): the tile and its right halo (zero past L)
        m = n + H
        win = xc[..., a:a + m + H].unfold(-1, K, 1)  # (B, D, m, K): win[t, k] = xc[t+k]
        if ids is not None:
            id_out = ids[:, a + H:a + H + m]  # id of output position t
            id_win = ids[:, a:a + m + H].unfold(1, K, 1)
            mask = (id_win == id_out.unsqueeze(-1)).to(f32).unsqueeze(1)  # (B, 1, m, K)
        else:
            id_out, mask = None, torch.ones(1, 1, m, K, dtype=f32, device=x.device)
        g = g_full[..., a:a + m].clone()
        if Bug.NO_RIGHT_HALO in bugs:
            g[..., n:] = 0
        dsilu = None
        if activation == "silu":
            xwin = win
            if Bug.SILU_NO_INPUT_HALO in bugs:  # inputs at or after e read as zeros
                xr = xc[..., a:a + m + H].clone()
                xr[..., n + H:] = 0
                xwin = xr.unfold(-1, K, 1)
            pre = (xwin * mask * w[None, :, None, :]).sum(-1)
            if b is not None and Bug.SILU_NO_BIAS not in bugs:
                pre = pre + b[None, :, None]
            s = torch.sigmoid(pre)
            if Bug.SILU_WRONG_DERIVATIVE in bugs:
                g = g * s
            else:
                g = g * s * (1 + pre * (1 - s))
            if Bug.DFINAL_TIMES_SILU_GRAD in bugs:
                dsilu = s * (1 + pre * (1 - s))
        if id_out is not None and Bug.PADDING_NOT_MASKED not in bugs:
            g = g.masked_fill((id_out < 0).unsqueeze(1), 0)

        own = m if Bug.HALO_IN_DWEIGHT in bugs else n
        wmask = torch.ones_like(mask) if Bug.DWEIGHT_NO_MASK in bugs else mask
        prod = win[..., :own, :] * wmask[..., :own, :] * g[..., :own, None]
        if Bug.DWEIGHT_BATCH0_ONLY in bugs:
            prod = prod[:1]
        dw_parts.append(prod.sum((0, 2)))
        db_parts.append(g[..., :n].sum((0, 2)))

        # dx[p] = sum_k M[p+H-k, k] w[k] g[p+H-k]: gather from outputs at or after p
        dmask = torch.ones_like(mask) if Bug.MASK_IGNORED_IN_DX in bugs else mask
        acc = torch.zeros(B, D, n, dtype=f32, device=x.device)
        for k in range(K):
            j = H - k  # output offset from input position
            rows = slice(0, n) if Bug.MASK_SOURCE_ID in bugs else slice(j, j + n)
            acc += dmask[..., rows, k] * w[None, :, k, None] * g[..., j:j + n]
        if dF is not None:
            lo = max(a, L - H)
            if lo < e:
                dfin = dF[..., lo - (L - H):e - (L - H)]
                if Bug.DFINAL_TIMES_WEIGHT in bugs:
                    dfin = dfin * w[None, :, K - 1, None]
                if dsilu is not None:
                    dfin = dfin * dsilu[..., lo - a:e - a]
                acc[..., lo - a:] += dfin
        dx[..., a:e] = acc

        if a == 0 and initial_states is not None:
            # state slot i (extended position i < H) feeds outputs t = i + H - k >= 0
            dinit = torch.zeros(B, D, H, dtype=f32, device=x.device)
            for i in range(H):
                for k in range(K):
                    t = i - k  # output index relative to the tile start (a == 0)
                    if 0 <= t < m:
                        dinit[..., i] += mask[..., t, k] * w[None, :, k] * g[..., t]
            if dF is not None and Bug.DINIT_NO_DFINAL not in bugs:
                for i in range(L, H):
                    dinit[..., i] += dF[..., i - L]

    out["dx"].copy_(dx)
    dweight = torch.stack(dw_parts).sum(0)
    if Bug.CL_TAIL_DWEIGHT in bugs and x.stride(1) == 1 and x.stride(2) > 1:
        dweight[D // 8 * 8:] = 0
    out["dweight"].copy_(dweight)
    if "dbias" in out:
        out["dbias"].copy_(torch.stack(db_parts).sum(0))
    if "dinitial_states" in out:
        out["dinitial_states"].copy_(dinit)


@implementation("causal_conv1d", "torch_tiled", kind="reference", deterministic=True)
def torch_tiled(**kw):
    """fp32 tiled model of a CUDA kernel (64-step tiles, right halo, fixed-order reduction)"""
    backward_tiled(**kw)
