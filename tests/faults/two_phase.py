"""Two-phase softmax implementations (an untimed `prepare`, then the backward alone), well
and badly behaved, for tests/harness/test_two_phase.py. Each is an object with `prepare`
and `__call__`, as `--impl module:object` takes one."""

import torch

CALLS = {"prepare": 0, "backward": 0}


def _grad(y, dy, mask, scale):
    g = dy.float() if mask is None else torch.where(mask, dy.float() * scale, 0.0)
    yf = y.float()
    return (yf * (g - (g * yf).sum(-1, keepdim=True))).to(y.dtype)


class Good:
    """saves y in fp64 (8 bytes an element) and y itself (the caller's: no bytes), computes
    dx each call"""

    def prepare(self, *, y, dy, mask, scale):
        CALLS["prepare"] += 1
        return {"y64": y.double(), "y": y}

    def __call__(self, *, y, dy, mask, scale, saved):
        CALLS["backward"] += 1
        return {"dx": _grad(saved["y64"].to(y.dtype), dy, mask, scale)}


class Graph:
    """keeps an autograd graph (a softmax forward of y's logarithm) and runs its backward"""

    def prepare(self, *, y, dy, mask, scale):
        x = y.float().clamp_min(1e-30).log().requires_grad_()
        with torch.enable_grad():
            z = torch.softmax(x, -1)
        return {"x": x, "z": z}

    def __call__(self, *, y, dy, mask, scale, saved):
        g = dy.float() if mask is None else torch.where(mask, dy.float() * scale, 0.0)
        (dx,) = torch.autograd.grad(saved["z"], saved["x"], g, retain_graph=True)
        return {"dx": dx.to(y.dtype)}


class Stale:
    """computes dx once, in prepare, and hands the same tensor back on every call"""

    def prepare(self, *, y, dy, mask, scale):
        return {"dx": _grad(y, dy, mask, scale)}

    def __call__(self, *, y, dy, mask, scale, saved):
        return {"dx": saved["dx"]}


class WrongDtype:
    """returns dx in fp32 whatever the case's dtype"""

    def prepare(self, *, y, dy, mask, scale):
        return None

    def __call__(self, *, y, dy, mask, scale, saved):
        return {"dx": _grad(y, dy, mask, scale).float().add(0)}


class Refuses:
    """refuses every case when called, as a pinned library backend does"""

    def prepare(self, *, y, dy, mask, scale):
        from bwd_suite.suite.registry import Unsupported
        raise Unsupported("No available kernel (the library says: rows too long)")

    def __call__(self, *, y, dy, mask, scale, saved):
        raise AssertionError("never called")


good, graph, stale, wrong_dtype, refuses = Good(), Graph(), Stale(), WrongDtype(), Refuses()
