"""The one place that makes tensors: seeded random data in a chosen memory layout, and
NaN-poisoned output buffers.

Ops build their inputs from these primitives so that every test, benchmark and mutant
sees the same values for the same case (seeded on the CPU, then moved), never zeros.
"""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

import torch

DTYPES = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float64": torch.float64,
}
DTYPE_SHORT = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64"}

# Quiet NaNs with a payload that arithmetic does not produce (hardware and libraries
# return the canonical NaN), so an element still holding this exact bit pattern after
# the call was never written.
_POISON_BITS = {
    torch.float64: (torch.int64, 0x7FF8DEADBEEF0BAD),
    torch.float32: (torch.int32, 0x7FC0BAD5),
    torch.float16: (torch.int16, 0x7E5B),
    torch.bfloat16: (torch.int16, 0x7FDB),
}


def generator(seed: int) -> torch.Generator:
    g = torch.Generator(device="cpu")
    g.manual_seed(seed)
    return g


def randn(shape: Sequence[int], dtype: torch.dtype, gen: torch.Generator,
          device: torch.device, scale: float = 1.0, order: Optional[Sequence[int]] = None,
          pad_last: int = 0) -> torch.Tensor:
    """Normal(0, scale) values of `shape`, rounded to `dtype` and laid out in memory as
    `order` (a permutation: order[-1] is the fastest-moving logical dim). `pad_last` > 0
    makes the tensor a non-contiguous slice of a buffer wider along that fastest dim."""
    order = list(order) if order is not None else list(range(len(shape)))
    phys = [shape[d] for d in order]
    phys_alloc = phys[:-1] + [phys[-1] + pad_last]
    base = (torch.randn(phys_alloc, generator=gen, dtype=torch.float32) * scale).to(dtype)
    # move the dense buffer first: `.to(device)` of a slice or permutation would make it
    # dense again and lose the layout under test
    base = base.to(device)
    if pad_last:
        base = base[..., pad_last // 2: pad_last // 2 + phys[-1]]
    inverse = [order.index(d) for d in range(len(shape))]
    return base.permute(inverse)


def empty_like_layout(t: torch.Tensor, dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    """Dense tensor of t's shape whose memory order follows t's strides."""
    return torch.empty_like(t, dtype=dtype or t.dtype, memory_format=torch.preserve_format)


def _poison_value(dtype: torch.dtype) -> tuple[torch.dtype, int]:
    int_dtype, bits = _POISON_BITS[dtype]
    if bits > torch.iinfo(int_dtype).max:  # as the signed integer of the same bits
        bits -= 1 << torch.iinfo(int_dtype).bits
    return int_dtype, bits


def poison_(t: torch.Tensor) -> torch.Tensor:
    """Fill `t` (any strides) with the poison NaN of its dtype."""
    int_dtype, bits = _poison_value(t.dtype)
    t.view(int_dtype).fill_(bits)
    return t


def is_poison(t: torch.Tensor) -> torch.Tensor:
    """Boolean mask of elements that still hold the poison bit pattern."""
    int_dtype, bits = _poison_value(t.dtype)
    return t.view(int_dtype) == bits


def perturbed(t: torch.Tensor, rel: float, gen: torch.Generator) -> torch.Tensor:
    """t * (1 + rel * u), u uniform in [-1, 1]: one rounding's worth of noise."""
    if t.device.type == "cpu":
        u = torch.rand(t.shape, generator=gen, dtype=torch.float64)
    else:
        # drawn where t lives (seeded from gen): a CPU draw of GBs of logits took minutes
        seed = int(torch.randint(0, 2**62, (1,), generator=gen))
        u = torch.rand(t.shape, dtype=torch.float64, device=t.device,
                       generator=torch.Generator(t.device).manual_seed(seed))
    # in place on u: one float64 temporary beside t, not three
    return u.mul_(2).sub_(1).mul_(rel).add_(1).mul_(t)


def upstream(noise: torch.Tensor, y: Optional[torch.Tensor], a: float, b: float,
             peak: float) -> torch.Tensor:
    """Upstream gradient a + b * y' + noise in float64, y' = y standardized along the last
    dim (0 where y is constant there; y may be None when b is 0), plus `peak` at the last
    element. N(0, 1) noise alone makes row sums such as mean(dy) or sum(dy * y) shrink like
    1/sqrt(N), so a kernel that drops one passes at large N in 16-bit; these keep them of
    order one. The caller rounds the result once to its dtype."""
    g = noise.double() + a
    if b:
        yc = y - y.mean(-1, keepdim=True)
        sd = yc.pow(2).mean(-1, keepdim=True).sqrt()
        g += b * torch.where(sd > 0, yc / sd.clamp_min(1e-300), 0.0)
    g[..., -1] += peak
    return g


def batch_reordered(tensors: Mapping, names: Sequence[str], order: torch.Tensor) -> dict:
    """`tensors` with those named (and present) reordered along dim 0 by `order`, each in
    its own memory layout (a batch-invariance variant: OpSpec.batch_variant)."""
    out = dict(tensors)
    for k in names:
        t = out.get(k)
        if t is not None:
            out[k] = empty_like_layout(t).copy_(t.index_select(0, order.to(t.device)))
    return out


def batch_restored(outputs: Mapping, order: torch.Tensor) -> dict:
    """Outputs computed on inputs reordered by `order`, put back in the original order."""
    back = torch.argsort(order)
    return {k: v.index_select(0, back.to(v.device)) for k, v in outputs.items()}
