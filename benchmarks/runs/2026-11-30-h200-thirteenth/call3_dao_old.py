"""Thirteenth session, call 3: Dao's adapter as it was before (through its wrapper
causal_conv1d_bwd_function, results copied into the suite's outputs inside the timed call),
registered as dao_copy / dao_det_copy to be timed beside the new adapter in one run."""
from causal_conv1d.cpp_functions import causal_conv1d_bwd_function

from kernels.causal_conv1d import dao as new
from suite.registry import implementation


def _old_call(x, weight, bias, dout, seq_idx, initial_states, dfinal_states, activation, out):
    _, dw, db, dinit = causal_conv1d_bwd_function(
        x, weight, bias, dout, seq_idx, initial_states, dfinal_states, out["dx"],
        initial_states is not None, activation == "silu")
    out["dweight"].copy_(dw)
    if bias is not None:
        out["dbias"].copy_(db)
    if initial_states is not None:
        out["dinitial_states"].copy_(dinit)


@implementation("causal_conv1d", "dao_copy", deterministic=False, **new._common)
def dao_copy(**kw):
    """Dao, default mode, the old adapter"""
    with new._deterministic_mode(False):
        _old_call(**kw)


@implementation("causal_conv1d", "dao_det_copy", deterministic=True, **new._common)
def dao_det_copy(**kw):
    """Dao, deterministic mode, the old adapter"""
    with new._deterministic_mode(True):
        _old_call(**kw)
