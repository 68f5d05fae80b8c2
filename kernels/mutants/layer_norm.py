"""Deliberately broken LayerNorm backwards: each plants one bug a port of the backward gets
wrong into a blocked fp32 model of a CUDA kernel (`backward_blocked` below), one `Bug`
switch each.

The model: rows read as vectors of 8 columns (`VECTOR`), dx in the x-hat form from the
saved fp32 mean and rstd with fp32 row sums and one rounding at the store, dgamma and
dbeta as per-block partial column sums over blocks of 4 rows (`ROW_BLOCK`), added in a
fixed order, in column tiles of 32 (`COL_TILE`). With no bug it passes every case.

The suite must fail every mutant on the default CI cases (mutation score 100%), and the
cross-case diagnosis should name the planted cause: each mutant's function carries
`planted_cause`, a value of `ops.layer_norm_causes.Cause` or of the generic
`suite.diagnosis.Generic`, which `python -m bwd_suite mutants` and tests/harness/
test_mutants.py compare with the diagnosis. Registered with kind "mutant", so runs skip
them unless asked (`--include-mutants`, `--impl <name>` or `python -m bwd_suite mutants`).
"""

from __future__ import annotations

import enum
from typing import FrozenSet

import torch

from bwd_suite.kernels.mutants import Mutant, register
from bwd_suite.ops.layer_norm_causes import COL_TILE, ROW_BLOCK, VECTOR, Cause
from bwd_suite.suite.diagnosis import Generic


class Bug(enum.Enum):
    DGAMMA_LAST_ROW_BLOCK = ("the dgamma/dbeta block loop runs over whole blocks of 4 rows "
                             "only: the rows of the last, partial block are lost")
    MEAN_IN_INPUT_DTYPE = ("the saved fp32 mean is read in the activation dtype, so x - mean "
                           "is off by the mean's 16-bit rounding (large on large-mean rows)")
    DOT_SHORT = "the row sum of g * xhat runs over N-1 columns (the last one is left out)"
    DGAMMA_16BIT_ACC = ("dgamma and dbeta accumulate their column sums in the activation "
                        "dtype (16-bit for bf16/fp16 rows), not fp32")
    ROW_STRIDE_PADDED = ("x and dy rows are read at a stride rounded up to a multiple of 8 "
                         "columns (a padded leading dimension)")
    DBETA_SKIPS_FIRST_ROW = "the dbeta row loop starts at row 1 (dbeta from the wrong rows)"
    MEAN_TWICE = "the mean is subtracted twice: xhat = (x - mean - mean) * rstd"
    LAST_ROW_NOT_WRITTEN = "the grid covers M-1 rows: the last row of dx is never written"
    DX_WITHOUT_GAMMA = "dx is computed from g = dy instead of dy * gamma"
    COLUMN_TAIL_NO_XHAT = ("the last, partial vector of 8 columns leaves out the x-hat "
                           "term: dx = rstd (g - mean(g)) there")
    DGAMMA_TILE_OFFSET = ("each 32-column tile of dgamma after the first reads xhat at its "
                          "tile-local column (the tile's column offset is not added)")


def _rows(t: torch.Tensor, bugs: FrozenSet[Bug]) -> torch.Tensor:
    """(M, N) in fp32, as the kernel reads it: at the row stride N, or with the padded-
    stride bug at N rounded up to 8 (reading into the next row; zeros past the end)."""
    M, N = t.shape
    if Bug.ROW_STRIDE_PADDED not in bugs or N % VECTOR == 0:
        return t.float()
    Np = -(-N // VECTOR) * VECTOR
    flat = torch.cat([t.reshape(-1).float(), t.new_zeros(M * Np, dtype=torch.float32)])
    return flat.as_strided((M, N), (Np, 1)).clone()


def _column_sums(vals: torch.Tensor, rows: range, acc: torch.dtype) -> torch.Tensor:
    """Sum over `rows` of vals (M, N), per block of ROW_BLOCK rows, blocks in order; the
    running sums held in `acc` (fp32, or 16-bit with the accumulator bug)."""
    total = torch.zeros(vals.shape[1], dtype=acc, device=vals.device)
    for b in range(rows.start, rows.stop, ROW_BLOCK):
        block = vals[b:min(b + ROW_BLOCK, rows.stop)]
        if acc == torch.float32:
            total = total + block.sum(0)
        else:  # row by row in the narrow type, as a T accumulator does
            for r in range(block.shape[0]):
                total = (total.float() + block[r]).to(acc)
    return total


def backward_blocked(x, dy, gamma, mean, rstd, out, bugs: FrozenSet[Bug] = frozenset()):
    M, N = x.shape
    f32 = torch.float32
    xs, dys = _rows(x, bugs), _rows(dy, bugs)
    m = (mean.to(x.dtype) if Bug.MEAN_IN_INPUT_DTYPE in bugs else mean).float()[:, None]
    r = rstd.float()[:, None]
    xhat = (xs - m - m) * r if Bug.MEAN_TWICE in bugs else (xs - m) * r
    g = dys * gamma.float() if gamma is not None and Bug.DX_WITHOUT_GAMMA not in bugs \
        else dys
    c1 = g.sum(-1, keepdim=True) / N
    gx = g * xhat
    c2 = (gx[:, :N - 1] if Bug.DOT_SHORT in bugs else gx).sum(-1, keepdim=True) / N
    dx = r * (g - c1 - xhat * c2)
    if Bug.COLUMN_TAIL_NO_XHAT in bugs:
        full = N // VECTOR * VECTOR
        dx[:, full:] = (r * (g - c1))[:, full:]
    rows = M - 1 if Bug.LAST_ROW_NOT_WRITTEN in bugs else M
    out["dx"][:rows].copy_(dx[:rows])
    if gamma is None:
        return
    acc = x.dtype if Bug.DGAMMA_16BIT_ACC in bugs else f32
    xg = xhat
    if Bug.DGAMMA_TILE_OFFSET in bugs:
        xg = xhat[:, torch.arange(N, device=x.device) % COL_TILE]
    whole = range(0, M // ROW_BLOCK * ROW_BLOCK) if Bug.DGAMMA_LAST_ROW_BLOCK in bugs \
        else range(0, M)
    out["dgamma"].copy_(_column_sums(dys * xg, whole, acc))
    beta_rows = range(1, whole.stop) if Bug.DBETA_SKIPS_FIRST_ROW in bugs else whole
    out["dbeta"].copy_(_column_sums(dys, beta_rows, acc))


def clean(*, x, dy, gamma, mean, rstd, out):
    """The model with no bug (not registered: tests wrap it to check it passes)."""
    backward_blocked(x, dy, gamma, mean, rstd, out)


def _register(m: Mutant):
    return register("layer_norm", m, lambda m, **kw: backward_blocked(
        **kw, bugs=frozenset({m.bug})))


dgamma_last_row_block = _register(Mutant(
    "mutant_ln_dgamma_last_row_block", Bug.DGAMMA_LAST_ROW_BLOCK, Cause.ROW_BLOCK_TAIL,
    "fail (mismatch) in dgamma and dbeta, every column, by minus the rows past the last "
    "multiple of 4, only when rows is not a multiple of 4; dx right"))
mean_in_input_dtype = _register(Mutant(
    "mutant_ln_mean_in_input_dtype", Bug.MEAN_IN_INPUT_DTYPE, Cause.STATS_DTYPE,
    "fail (mismatch) in dx and dgamma on 16-bit rows with a large mean (1000: the mean's "
    "bf16 rounding moves xhat by up to 2/sigma); fp32 and zero-mean rows pass"))
dot_short = _register(Mutant(
    "mutant_ln_dot_short", Bug.DOT_SHORT, Cause.ROW_SUM_SHORT,
    "fail (mismatch) in dx, every element, by exactly rstd xhat (g xhat)[N-1] / N; "
    "dgamma, dbeta right; N = 1 passes"))
dgamma_16bit_accumulator = _register(Mutant(
    "mutant_ln_dgamma_16bit_accumulator", Bug.DGAMMA_16BIT_ACC, Cause.ACCUMULATOR_DTYPE,
    "fail (mismatch) in dgamma and dbeta, spread over every column, only with 16-bit "
    "activations; dx right; fp32 passes"))
row_stride_padded = _register(Mutant(
    "mutant_ln_row_stride_padded", Bug.ROW_STRIDE_PADDED, Cause.ROW_STRIDE,
    "fail (mismatch) in dx in every row but the first (and dgamma, dbeta), only when N is "
    "not a multiple of 8 and rows > 1"))
dbeta_skips_first_row = _register(Mutant(
    "mutant_ln_dbeta_skips_first_row", Bug.DBETA_SKIPS_FIRST_ROW, Cause.DBETA_ROWS,
    "fail (mismatch) in dbeta only, by minus row 0's dy, with affine"))
mean_twice = _register(Mutant(
    "mutant_ln_mean_twice", Bug.MEAN_TWICE, Cause.MEAN_TWICE,
    "fail (mismatch) in dx and dgamma by exactly the golden at twice the mean, worst on "
    "large means; dbeta right"))
last_row_not_written = _register(Mutant(
    "mutant_ln_last_row_not_written", Bug.LAST_ROW_NOT_WRITTEN, Generic.LAST_INDEX,
    "fail (unwritten output) in dx, only in the last row; dgamma, dbeta right"))
dx_without_gamma = _register(Mutant(
    "mutant_ln_dx_without_gamma", Bug.DX_WITHOUT_GAMMA, Cause.DX_GAMMA,
    "fail (mismatch) in dx, every element, only with affine; without affine it passes"))
column_tail_no_xhat = _register(Mutant(
    "mutant_ln_column_tail_no_xhat", Bug.COLUMN_TAIL_NO_XHAT, Cause.COLUMN_TAIL,
    "fail (mismatch) in dx only past the last multiple of 8 columns, only when N is not "
    "a multiple of 8 (and N > 8)"))
dgamma_tile_offset = _register(Mutant(
    "mutant_ln_dgamma_tile_offset", Bug.DGAMMA_TILE_OFFSET, Generic.TILE_OFFSET,
    "fail (mismatch) in dgamma in every 32-column tile but the first, only with affine "
    "and N > 32; dx, dbeta right"))

ALL = (dgamma_last_row_block, mean_in_input_dtype, dot_short, dgamma_16bit_accumulator,
       row_stride_padded, dbeta_skips_first_row, mean_twice, last_row_not_written,
       dx_without_gamma, column_tail_no_xhat, dgamma_tile_offset)
