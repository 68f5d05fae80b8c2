"""Softmax backward port (held out): the row-dot workspace is allocated once per (rows,
device) and reused across calls, accumulated into without being zeroed first."""

import torch

_WORKSPACE = {}


def _row_workspace(rows, device):
    key = (rows, str(device))
    if key not in _WORKSPACE:
        _WORKSPACE[key] = torch.zeros(rows, 1, dtype=torch.float32, device=device)
    return _WORKSPACE[key]  # bug: not zeroed on reuse


def backward(*, y, dy, mask, scale, out):
    yf = y.float().reshape(-1, y.shape[-1])
    g = dy.float().reshape(-1, y.shape[-1])
    if mask is not None:
        g = torch.where(mask.reshape(g.shape), g * scale, 0.0)
    dot = _row_workspace(yf.shape[0], y.device)
    dot += (g * yf).sum(dim=-1, keepdim=True)
    out["dx"].copy_((yf * (g - dot)).reshape(y.shape))
