"""An attention backward whose result depends on where a sequence sits in the batch (a
last-bit nudge of every batch row but the first), for the batch-invariance check."""

import torch


def nudged(*, q, k, v, o, lse, dout, seq_idx, attn_mask, dropout_mask, causal, align,
           window_left, window_right, softcap, scale, dropout, out):
    from bwd_suite.kernels.attention.torch_tiled import torch_tiled
    torch_tiled(q=q, k=k, v=v, o=o, lse=lse, dout=dout, seq_idx=seq_idx, attn_mask=attn_mask,
                dropout_mask=dropout_mask, causal=causal, align=align,
                window_left=window_left, window_right=window_right, softcap=softcap,
                scale=scale, dropout=dropout, out=out)
    for name in ("dq", "dk", "dv"):
        t = out[name]
        t[1:].copy_(torch.nextafter(t[1:], torch.full_like(t[1:], float("inf"))))
