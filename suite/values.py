"""An op's input or output value: a tensor, a list of tensors (a model's parameter list, for
multi-tensor implementations), or None (an optional input a case does not have).

The one place that asks which of them a value is: everything else handles a value through
these functions, so a new kind of value (a dict of tensors, say) is a change here only.
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence, Union

import torch

Value = Union[torch.Tensor, list, tuple, None]


def is_list(v: Value) -> bool:
    """A list of tensors (not one tensor, not None)."""
    return isinstance(v, (list, tuple))


def is_value(v) -> bool:
    """A tensor or a list of them: an input the harness copies, checks and compares (not
    None, not an attribute)."""
    return isinstance(v, torch.Tensor) or is_list(v)


def tensors(v: Value) -> list:
    """The tensors of a value: [] for None, [t] for a tensor, the list's tensors."""
    if v is None:
        return []
    return [x for x in v if isinstance(x, torch.Tensor)] if is_list(v) else [v]


def map_tensors(fn: Callable[[torch.Tensor], object], v):
    """fn applied to a tensor, or to each tensor of a list (a new list); other values (None,
    attributes) as they are."""
    if is_list(v):
        return [fn(x) if isinstance(x, torch.Tensor) else x for x in v]
    return fn(v) if isinstance(v, torch.Tensor) else v


def like(v: Value, items: Sequence) -> Value:
    """`items` in the kind of `v`: a list when v is a list, else its one element."""
    return list(items) if is_list(v) else items[0]


def first(v: Value) -> Optional[torch.Tensor]:
    """The tensor, or the list's first: what stands for the value's dtype and device."""
    ts = tensors(v)
    return ts[0] if ts else None


def flat(v: Value) -> torch.Tensor:
    """A value as one tensor: a list's tensors flattened and joined (its metrics are those of
    the whole list: one scale, one worst element)."""
    if is_list(v):
        return torch.cat([x.reshape(-1) for x in v]) if len(v) else torch.zeros(0)
    return v


def shapes(v: Value) -> Optional[list]:
    """The shapes of a list's tensors; None for a single tensor."""
    return [tuple(x.shape) for x in v] if is_list(v) else None
