"""Deliberately broken softmax backwards: each plants one bug a port of the fused dropout +
softmax backward gets wrong into an fp32 model of a CUDA kernel (`backward_fused` below),
one `Bug` switch each.

The model: rows read as vectors of 8 (`VECTOR`), in tiles of 1024 columns (`COL_TILE`)
for long rows, 4 rows per block (`ROW_GROUP`); the dropout backward g = dy * mask * scale,
one fp32 row dot sum(g * y), then dx = y * (g - dot) rounded once at the store. With no
bug it passes every case.

The suite must fail every mutant on the default CI cases (mutation score 100%), and the
cross-case diagnosis should name the planted cause: each mutant's function carries
`planted_cause`, a value of `ops.softmax_causes.Cause` or of the generic
`suite.diagnosis.Generic`. Registered with kind "mutant", so runs skip them unless asked.
"""

from __future__ import annotations

import enum
from typing import FrozenSet

import torch

from bwd_suite.kernels.mutants import Mutant, register
from bwd_suite.ops.softmax_causes import COL_TILE, ROW_GROUP, VECTOR, Cause
from bwd_suite.suite.diagnosis import Generic


class Bug(enum.Enum):
    SCALE_TWICE = ("the dropout scale 1/(1-p) is applied twice (in the dropout backward "
                   "and again in the softmax part)")
    SCALE_MISSING = "the dropout scale is not applied: g = dy * mask"
    DOT_SHORT = "the row dot sum(g * y) runs over N-1 columns (the last one is left out)"
    MASK_NOT_IN_DOT = ("the row dot sums dy * scale * y over every column: the keep mask "
                       "is applied to g but not inside the dot")
    MASK_INVERTED = "the keep mask is read as a drop mask: g = dy * (1 - mask) * scale"
    LAST_ROW_NOT_WRITTEN = "the grid covers R-1 rows: the last row of dx is never written"
    ROW_STRIDE_PADDED = ("y, dy and the mask are read at a row stride rounded up to a "
                         "multiple of 8 (a padded leading dimension)")
    COLUMN_TAIL_NO_DOT = ("the last, partial vector of 8 columns leaves out the dot: "
                          "dx = y * g there")
    TILE_OFFSET = ("the store pass of each 1024-column tile after the first reads y at its "
                   "tile-local columns (the tile's column offset is not added)")
    ROW_GROUP_SHARED_DOT = ("the rows of a 4-row block all use the block's first row's "
                            "dot (the reduction result is broadcast from the wrong warp)")


def _rows(t: torch.Tensor, bugs: FrozenSet[Bug]) -> torch.Tensor:
    """(R, N) as the kernel reads it: at the row stride N, or with the padded-stride bug
    at N rounded up to 8 (reading into the next row; zeros past the end)."""
    R, N = t.shape
    if Bug.ROW_STRIDE_PADDED not in bugs or N % VECTOR == 0:
        return t
    Np = -(-N // VECTOR) * VECTOR
    flat = torch.cat([t.reshape(-1), t.new_zeros(R * Np)])
    return flat.as_strided((R, N), (Np, 1)).clone()


def backward_fused(y, dy, mask, scale, out, bugs: FrozenSet[Bug] = frozenset()):
    R, N = y.shape
    yf, dyf = _rows(y, bugs).float(), _rows(dy, bugs).float()
    if mask is not None:
        keep = _rows(mask, bugs)
        if Bug.MASK_INVERTED in bugs:
            keep = ~keep
        s = scale * scale if Bug.SCALE_TWICE in bugs else \
            1.0 if Bug.SCALE_MISSING in bugs else scale
        g = torch.where(keep, dyf * s, 0.0)
        gdot = dyf * s if Bug.MASK_NOT_IN_DOT in bugs else g
    else:
        g = gdot = dyf
    prod = gdot * yf
    dot = (prod[:, :N - 1] if Bug.DOT_SHORT in bugs else prod).sum(-1, keepdim=True)
    if Bug.ROW_GROUP_SHARED_DOT in bugs:
        dot = dot[torch.arange(R, device=y.device) // ROW_GROUP * ROW_GROUP]
    y_store = yf
    if Bug.TILE_OFFSET in bugs:
        y_store = yf[:, torch.arange(N, device=y.device) % COL_TILE]
    dx = y_store * (g - dot)
    if Bug.COLUMN_TAIL_NO_DOT in bugs:
        full = N // VECTOR * VECTOR
        dx[:, full:] = (y_store * g)[:, full:]
    rows = R - 1 if Bug.LAST_ROW_NOT_WRITTEN in bugs else R
    out["dx"][:rows].copy_(dx[:rows])


def clean(*, y, dy, mask, scale, out):
    """The model with no bug (not registered: tests wrap it to check it passes)."""
    backward_fused(y, dy, mask, scale, out)


def _register(m: Mutant):
    return register("softmax", m, lambda m, **kw: backward_fused(
        **kw, bugs=frozenset({m.bug})))


scale_twice = _register(Mutant(
    "mutant_softmax_scale_twice", Bug.SCALE_TWICE, Cause.SCALE_TWICE,
    "fail (mismatch) in dx, every element, by exactly (scale - 1) x dx, only with dropout "
    "and p > 0; p = 0 and no dropout pass"))
scale_missing = _register(Mutant(
    "mutant_softmax_scale_missing", Bug.SCALE_MISSING, Cause.SCALE_MISSING,
    "fail (mismatch) in dx, every element, by exactly (1/scale - 1) x dx, only with "
    "dropout and p > 0"))
dot_short = _register(Mutant(
    "mutant_softmax_dot_short", Bug.DOT_SHORT, Cause.DOT_SHORT,
    "fail (mismatch) in dx, every element of a row, by exactly y x (g y)[N-1]"))
mask_not_in_dot = _register(Mutant(
    "mutant_softmax_mask_not_in_dot", Bug.MASK_NOT_IN_DOT, Cause.DOT_MASK,
    "fail (mismatch) in dx by minus y x the dropped elements' share of the dot, only "
    "with dropped elements"))
mask_inverted = _register(Mutant(
    "mutant_softmax_mask_inverted", Bug.MASK_INVERTED, Cause.MASK_INVERTED,
    "fail (mismatch) in dx everywhere, only with dropout"))
last_row_not_written = _register(Mutant(
    "mutant_softmax_last_row_not_written", Bug.LAST_ROW_NOT_WRITTEN, Generic.LAST_INDEX,
    "fail (unwritten output) in dx, only in the last row"))
row_stride_padded = _register(Mutant(
    "mutant_softmax_row_stride_padded", Bug.ROW_STRIDE_PADDED, Cause.ROW_STRIDE,
    "fail (mismatch) in dx in every row but the first, only when N is not a multiple of "
    "8 and rows > 1"))
column_tail_no_dot = _register(Mutant(
    "mutant_softmax_column_tail_no_dot", Bug.COLUMN_TAIL_NO_DOT, Cause.COLUMN_TAIL,
    "fail (mismatch) in dx only past the last multiple of 8 columns, only when N is not "
    "a multiple of 8"))
tile_offset = _register(Mutant(
    "mutant_softmax_tile_offset", Bug.TILE_OFFSET, Generic.TILE_OFFSET,
    "fail (mismatch) in dx in every 1024-column tile but the first, only for rows longer "
    "than 1024"))
row_group_shared_dot = _register(Mutant(
    "mutant_softmax_row_group_shared_dot", Bug.ROW_GROUP_SHARED_DOT, Generic.TILE_POSITION,
    "fail (mismatch) in dx in rows 1-3 of each 4-row block (row 0 of each block is right), "
    "only with rows > 1"))

ALL = (scale_twice, scale_missing, dot_short, mask_not_in_dot, mask_inverted,
       last_row_not_written, row_stride_padded, column_tail_no_dot, tile_offset,
       row_group_shared_dot)
