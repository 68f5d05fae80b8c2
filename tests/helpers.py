"""Implementations loaded from outside the registry (`--impl OP=tests.helpers:NAME`),
used by the CLI tests: one that raises, one that is interrupted mid-run, two that declare
known failures, one that simulates a sticky CUDA fault, one that is plainly wrong, and
one decorated for layer_norm (for the tests that bind an implementation to its op)."""

from bwd_suite.kernels.causal_conv1d.tiled import backward_tiled
from bwd_suite.kernels.causal_conv1d.torch_ref import torch_ref
from bwd_suite.kernels.layer_norm.torch_ref import torch_ref as layer_norm_torch_ref
from bwd_suite.suite import cuda_fault
from bwd_suite.suite.registry import implementation

_calls = {"n": 0}


def raising(**kw):
    raise ValueError("deliberate failure inside the implementation")


def interrupt_on_third_call(**kw):
    """Behaves like the fp32 tiled model, then simulates Ctrl-C on its third call."""
    _calls["n"] += 1
    if _calls["n"] == 3:
        raise KeyboardInterrupt
    backward_tiled(**kw)


# A known failure (dx doubled) declared for the bias cases, and a correct implementation
# that declares the same: pytest must xfail the first and fail the second (strict).
_KNOWN = {"causal_conv1d/bias/": "dx deliberately doubled"}


@implementation("causal_conv1d", "tests_known_bad", kind="external", known_failures=_KNOWN)
def known_bad(**kw):
    torch_ref(**kw)
    kw["out"]["dx"].mul_(2)


@implementation("causal_conv1d", "tests_known_good", kind="external", known_failures=_KNOWN)
def known_good(**kw):
    """Correct: the fp32 tiled model (torch_ref's bf16 dweight is not, for fp32 weights)."""
    backward_tiled(**kw)


def loses_cuda_context(**kw):
    """Raises like a kernel fault that loses the CUDA context (a CPU stand-in: from now on
    the suite's probe of the context fails)."""
    cuda_fault._context_lost = lambda: True
    raise RuntimeError("CUDA error: misaligned address")


def doubles_dx(**kw):
    """Behaves like torch_ref, then doubles dx: a plain wrong implementation."""
    torch_ref(**kw)
    kw["out"]["dx"].mul_(2)


@implementation("layer_norm", "tests_layer_norm_only", kind="external")
def layer_norm_only(**kw):
    """Decorated for layer_norm (layer_norm's torch_ref): never on another op's cases."""
    layer_norm_torch_ref(**kw)
