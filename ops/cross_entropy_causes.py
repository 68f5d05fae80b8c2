"""The likely causes of a wrong cross entropy: named by the diagnosis
(ops/cross_entropy_diagnosis.py) and planted by the mutants
(kernels/mutants/cross_entropy.py), which both import them from here."""

from __future__ import annotations

import enum


class Cause(enum.Enum):
    """Likely causes; the values are stored in `diagnosis_cause` and in mutants'
    `planted_cause` (with the generic ones of `suite.diagnosis.Generic`)."""

    MEAN_COUNTS_IGNORED = "mean_counts_ignored"
    SHIFT_MISSING = "shift_missing"
    SHIFT_CROSSES = "shift_crosses_sequences"
    IGNORED_GRADIENT = "ignored_gradient"
    SMOOTHING_V_MINUS_1 = "smoothing_v_minus_1"
    Z_LOSS_GRADIENT = "z_loss_gradient_missing"
    SOFTCAP_DERIVATIVE = "softcap_derivative_missing"
    EMPTY_MEAN_NAN = "empty_mean_nan"
    LSE_PRECISION = "lse_precision"
    SOFTCAP_FACTOR = "softcap_factor_missing"
    IGNORE_INDEX_DEFAULT = "ignore_index_default"
    MEAN_COUNT_UNSHIFTED = "mean_count_before_shift"
    NONE_GRAD_FIRST = "none_grad_first"
    SHIFT_TIME_MAJOR = "shift_time_major"
    LSE_OVERFLOW = "lse_overflow"
