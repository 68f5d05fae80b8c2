"""Linear backward port that sums dw and db over the M rows in tiles of 16 and counts the
tiles as M // 16: the last M % 16 rows (all of them when M < 16) are never added."""

import torch

from tests.data.ports.linear.reference_port import _act, _dact

TILE = 16


def _over_row_tiles(left, right):
    """(leftᵀ right, column sums of left) over whole tiles of rows only."""
    dw = torch.zeros(left.shape[1], right.shape[1])
    db = torch.zeros(left.shape[1])
    for t in range(left.shape[0] // TILE):
        rows = slice(t * TILE, (t + 1) * TILE)
        dw += left[rows].t() @ right[rows]
        db += left[rows].sum(0)
    return dw, db


def backward(*, x, w, dy, bias, z, a, activation, approximate, act_at, out):
    xf, wf, dyf = x.float(), w.float(), dy.float()
    if act_at == "output":
        dz = dyf
        if activation != "none":
            pre = z.float() if z is not None else xf @ wf.t() + (
                bias.float() if bias is not None else 0)
            dz = dyf * _dact(pre, activation, approximate)
        dx = dz @ wf
        dw, db = _over_row_tiles(dz, xf)
    else:
        g = dyf @ wf
        if activation == "none":
            dx, acted = g, xf
        else:
            dx = g * _dact(xf, activation, approximate)
            acted = a.float() if a is not None else _act(xf, activation, approximate)
        dw, db = _over_row_tiles(dyf, acted)
    out["dx"].copy_(dx)
    out["dw"].copy_(dw)
    if "db" in out:
        out["db"].copy_(db)
