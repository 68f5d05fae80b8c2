"""Implementations that take their process down, for the worker-isolation tests
(`--impl causal_conv1d=tests.crashing:NAME`): each behaves like torch_ref except on the
cases with initial states and SiLU (two of the eight bias cases of the ci profile), where
it dies its own way."""

import ctypes
import os
import signal
import time

from bwd_suite.kernels.causal_conv1d.tiled import backward_tiled as torch_ref  # fp32: correct


def _doomed(kw) -> bool:
    return kw["initial_states"] is not None and kw["activation"] == "silu"


def segfault(**kw):
    if _doomed(kw):
        ctypes.string_at(0)  # a read of address 0: SIGSEGV
    torch_ref(**kw)


def abort(**kw):
    if _doomed(kw):
        print("about to abort: last words", flush=True, file=__import__("sys").stderr)
        os.abort()
    torch_ref(**kw)


def exits(**kw):
    if _doomed(kw):
        os._exit(3)
    torch_ref(**kw)


def hangs(**kw):
    if _doomed(kw):
        time.sleep(3600)
    torch_ref(**kw)


def kills_itself(**kw):
    if _doomed(kw):
        os.kill(os.getpid(), signal.SIGKILL)
    torch_ref(**kw)


def replaces_dx(**kw):
    """Puts a correct float64 tensor of its own into out["dx"] instead of writing it."""
    import torch

    mine = {k: torch.empty_like(v) for k, v in kw["out"].items()}
    torch_ref(**{**kw, "out": mine})
    kw["out"]["dx"] = mine["dx"].double()
    for k, v in mine.items():
        if k != "dx":
            kw["out"][k].copy_(v)


def deletes_dx(**kw):
    torch_ref(**kw)
    del kw["out"]["dx"]


def raises_when_timed(**kw):
    """Correct on its first calls, raises from the third on (the timing's calls)."""
    x = kw["x"]  # the case's input tensor, the same object on each call of the case
    _, n = _calls.get(id(x), (x, 0))
    _calls[id(x)] = (x, n + 1)  # x kept alive: its id stays unique
    if n + 1 > 2:
        raise RuntimeError("deliberate failure while being timed")
    torch_ref(**kw)


_calls: dict = {}
