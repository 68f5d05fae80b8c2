"""The likely causes of a wrong linear backward: named by the diagnosis
(ops/linear_diagnosis.py) and planted by the mutants (kernels/mutants/linear.py), which
both import them from here.

ALIGN is the alignment a cuBLASLt epilogue path is taken at in the mutants' model (Apex
falls back to a GEMM without the bias gradient where its heuristic finds no algorithm,
which misaligned shapes make likely): the number of outputs N a multiple of it or not.
"""

from __future__ import annotations

import enum

ALIGN = 8  # elements: 16 bytes of a 16-bit row


class Cause(enum.Enum):
    """Likely causes; the values are stored in `diagnosis_cause` and in mutants'
    `planted_cause` (with the generic ones of `suite.diagnosis.Generic`)."""

    DW_TRANSPOSED = "dw_transposed"
    DB_AXIS = "db_axis"
    DERIVATIVE_AT_OUTPUT = "derivative_at_output"
    GELU_FORM = "gelu_form"
    DX_NO_DERIVATIVE = "dx_no_derivative"
    DB_LOW_PRECISION = "db_low_precision_sum"
    DB_UNWRITTEN = "db_unwritten"
    WGRAD_PREACTIVATION = "wgrad_preactivation"
    SCALED = "grad_scaled"
    DB_NO_DERIVATIVE = "db_no_derivative"
    Z_WITHOUT_BIAS = "preactivation_without_bias"
