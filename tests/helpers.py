"""Implementations loaded from outside the registry (`--impl tests.helpers:NAME`), used
by the CLI tests: one that raises, one that is interrupted mid-run."""

from kernels.causal_conv1d.torch_ref import torch_ref

_calls = {"n": 0}


def raising(**kw):
    raise ValueError("deliberate failure inside the implementation")


def interrupt_on_third_call(**kw):
    """Behaves like torch_ref, then simulates Ctrl-C on its third call."""
    _calls["n"] += 1
    if _calls["n"] == 3:
        raise KeyboardInterrupt
    torch_ref(**kw)
