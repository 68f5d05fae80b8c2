"""The likely causes of a wrong attention backward and the tile sizes they are stated in:
named by the diagnosis (ops/attention_diagnosis.py) and planted by the mutants
(kernels/mutants/attention.py), which both import them from here.

The sizes are those of the FlashAttention-2 style model in kernels/mutants/attention.py:
key/value blocks of BLOCK_K keys in the outer loop, query blocks of BLOCK_Q rows inside.
They are small (FlashAttention's are 64 or 128) so that the CPU-sized ci cases span
several blocks and have partial last ones.
"""

from __future__ import annotations

import enum

BLOCK_K = 16  # Bc, keys (and values) a block: the outer loop, one thread block each
BLOCK_Q = 16  # Br, query rows a block: the inner loop


class Cause(enum.Enum):
    """Likely causes; the values are stored in `diagnosis_cause` and in mutants'
    `planted_cause` (with the generic ones of `suite.diagnosis.Generic`)."""

    CAUSAL_CORNER = "causal_corner"
    GQA_GROUP_SUM = "gqa_group_sum"
    GQA_INTERLEAVED = "gqa_interleaved"
    DS_SCALE_MISSING = "ds_scale_missing"
    DS_SCALE_TWICE = "ds_scale_twice"
    D_MISSING = "d_missing"
    D_AXIS = "d_axis"
    EMPTY_ROWS_NAN = "empty_rows_nan"
    EMPTY_ROWS_GRAD = "empty_rows_grad"
    PADDING_SEEN = "padding_sees_padding"
    SOFTCAP_AT_CAPPED = "softcap_grad_at_capped"
    SCORES_16BIT = "scores_16bit"
    DK_DV_SWAPPED = "dk_dv_swapped"
    KEY_TAIL = "key_block_tail"
    WINDOW_EDGE = "window_edge"
    SCALED = "grad_scaled"
