"""The likely causes of a wrong adamw step: named by the diagnosis (ops/adamw_diagnosis.py)
and planted by the mutants (kernels/mutants/adamw.py), which both import them from here."""

from __future__ import annotations

import enum


class Cause(enum.Enum):
    """Likely causes; the values are stored in `diagnosis_cause` and in mutants'
    `planted_cause` (with the generic ones of `suite.diagnosis.Generic`)."""

    BIAS_CORRECTION = "bias_correction"
    COUPLED_DECAY = "coupled_decay"
    EPS_IN_SQRT = "eps_in_sqrt"
    SKIP_IGNORED = "skip_ignored"
    CLIP_ABOVE_ONE = "clip_above_one"
    MOMENTS_16BIT = "moments_16bit"
    MASTER_STALE = "master_stale"
    STEP_PER_TENSOR = "step_per_tensor"
    UNSCALE_MISSING = "unscale_missing"
    AMSGRAD_UNUSED = "amsgrad_unused"
    DECAY_AFTER_UPDATE = "decay_after_update"
    CLIP_PER_TENSOR = "clip_per_tensor"
    CLIP_NORM_SCALED = "clip_norm_scaled"
    BIAS_CORRECTION_UNROOTED = "bias_correction_unrooted"
    MAXIMIZE_ON_UPDATE = "maximize_on_update"
