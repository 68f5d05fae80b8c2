"""The likely causes of a wrong softmax backward and the kernel sizes they are stated in:
named by the diagnosis (ops/softmax_diagnosis.py) and planted by the mutants
(kernels/mutants/softmax.py), which both import them from here.

The sizes are those of a typical CUDA softmax backward (and of the fused model in
kernels/mutants/softmax.py): 8-element vectors, 1024-column tiles for long rows, groups
of 4 rows per block.
"""

from __future__ import annotations

import enum

VECTOR = 8  # elements per vector load (16 bytes of bf16)
COL_TILE = 1024  # columns per tile of a long row
ROW_GROUP = 4  # rows per block (one warp each)


class Cause(enum.Enum):
    """Likely causes; the values are stored in `diagnosis_cause` and in mutants'
    `planted_cause` (with the generic ones of `suite.diagnosis.Generic`)."""

    SCALE_TWICE = "dropout_scale_twice"
    SCALE_MISSING = "dropout_scale_missing"
    DOT_SHORT = "dot_short"
    DOT_MASK = "dot_mask"
    MASK_INVERTED = "mask_inverted"
    ROW_STRIDE = "row_stride"
    COLUMN_TAIL = "column_tail"
    SCALED = "dx_scaled"
