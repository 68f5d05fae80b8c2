"""The likely causes of a wrong causal conv1d backward: named by the diagnosis
(ops/causal_conv1d_diagnosis.py) and planted by the mutants
(kernels/mutants/causal_conv1d.py), which both import them from here."""

from __future__ import annotations

import enum


class Cause(enum.Enum):
    """Likely causes; the values are stored in `diagnosis_cause` and in mutants'
    `planted_cause`."""

    RIGHT_HALO = "right_halo"
    OUT_OF_RANGE = "out_of_range_gradients"
    SILU_HALO_RECOMPUTE = "silu_recompute_halo"
    SILU_RECOMPUTE_BIAS = "silu_recompute_bias"
    SILU_DERIVATIVE = "silu_derivative"
    HALO_IN_DWEIGHT = "halo_in_dweight"
    BATCH_REDUCTION = "batch_reduction"
    DFINAL_PATH = "dfinal_path_missing"
    DFINAL_SCALED = "dfinal_path_scaled"
    SHORT_SEQ_STATE = "short_sequence_state"
    DINIT_DFINAL = "dinit_dfinal_path"
    PACKED_MASK = "packed_mask"
    DWEIGHT_MASK = "dweight_mask"
    PADDING = "padding_not_masked"
    CHANNEL_TAIL = "channel_tail"
