"""Saved activations kept on the host between the forward and the backward, each with the
layout it had: strides, and its offset within 256 bytes.

PyTorch's `save_on_cpu(pin_memory=True)` packs each saved tensor into a dense host buffer,
so a view (half of a fused projection, a transposed layout) comes back contiguous, and a
backward that picks its path or its summation order by layout sums in another order: on the
H100 the offload check then saw conv1d's weight and bias gradients a rounding apart, which
says nothing about offloading. Here each saved tensor travels as the span of storage it
views, so the backward reads what it would have read without offload, and a deterministic
backward gives the same bits. The host holds the span (a strided view's gaps included).
"""

from __future__ import annotations

import torch

from bwd_suite.suite.errors import HarnessError

ALIGN_BYTES = 256  # the offset kept modulo this: vectorised and TMA paths key on alignment


def _span(t: torch.Tensor) -> int:
    """Elements from the tensor's first to its last, along its strides."""
    if t.numel() == 0:
        return 0
    return 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride()))


def pack(t: torch.Tensor, pin: bool):
    """The host copy of `t`'s span of storage, and what rebuilds `t` from it."""
    per = max(ALIGN_BYTES // t.element_size(), 1)
    lead = t.storage_offset() % per
    n = _span(t) + lead
    region = t.as_strided((n,), (1,), t.storage_offset() - lead)
    host = torch.empty(n, dtype=t.dtype, device="cpu", pin_memory=pin)
    host.copy_(region)
    return t.device, host, lead, tuple(t.shape), tuple(t.stride())


def unpack(packed, pin: bool) -> torch.Tensor:
    device, host, lead, shape, stride = packed
    return host.to(device, non_blocking=pin).as_strided(shape, stride, lead)


def _harness(what: str, hook):
    """`hook` with its failures (a pinned allocation refused, a copy failing) raised as the
    harness's: the offload is the suite's doing, not the implementation's."""
    def call(x):
        try:
            return hook(x)
        except Exception as e:  # noqa: BLE001 - whatever it was, it was ours
            raise HarnessError(f"the offload check's {what}: {type(e).__name__}: {e}") from e
    return call


def on_host(device: torch.device):
    """The context under which the forward's saved tensors live on the host (pinned when
    `device` is a GPU: the copies back are then asynchronous)."""
    pin = device.type == "cuda"
    return torch.autograd.graph.saved_tensors_hooks(
        _harness("copy of a saved tensor to the host", lambda t: pack(t, pin)),
        _harness("copy of a saved tensor back to the device", lambda p: unpack(p, pin)))
