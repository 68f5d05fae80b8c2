"""The likely causes of a wrong LayerNorm backward and the kernel sizes they are stated
in: named by the diagnosis (ops/layer_norm_diagnosis.py) and planted by the mutants
(kernels/mutants/layer_norm.py), which both import them from here.

The sizes are those of a typical CUDA LayerNorm backward (and of the blocked model in
kernels/mutants/layer_norm.py): 4 rows per dgamma block, 8-column vectors, 32-column
dgamma tiles.
"""

from __future__ import annotations

import enum

ROW_BLOCK = 4  # rows per block of the dgamma/dbeta partial sums
VECTOR = 8  # columns per vector load (16 bytes of bf16)
COL_TILE = 32  # columns per dgamma tile


class Cause(enum.Enum):
    """Likely causes; the values are stored in `diagnosis_cause` and in mutants'
    `planted_cause` (with the generic ones of `suite.diagnosis.Generic`)."""

    ROW_BLOCK_TAIL = "row_block_tail"
    STATS_DTYPE = "stats_dtype"
    ROW_SUM_SHORT = "row_sum_short"
    ACCUMULATOR_DTYPE = "accumulator_dtype"
    ROW_STRIDE = "row_stride"
    DBETA_ROWS = "dbeta_rows"
    MEAN_TWICE = "mean_twice"
    DX_GAMMA = "dx_gamma"
    COLUMN_TAIL = "column_tail"
    RAW_X_SUMS = "raw_x_sums"
    ROWS_LOST = "rows_lost"
