"""An op node of a model: its forward in eager PyTorch, its backward through the op's contract
and the run's chosen implementation; and the plan a model's forward follows.

A node is described by a `NodeOp` (built once per op, outside suite/: ops/blocks/nodes.py):

    forward(*tensors, **attrs) -> (outputs tuple, saved {name: tensor or value})
    contract(saved, grad_outputs, attrs) -> (op params, CaseInputs of the op's contract)
    grads(results, saved, attrs) -> one gradient per forward tensor (None where none)
    native(*tensors, **attrs) -> outputs tuple: the forward as PyTorch users write it
        (F.layer_norm, SDPA...), differentiated by autograd in a `native` run

`apply(node, plan, *tensors, **attrs)` runs it as a `torch.autograd.Function`: the tensors
the backward needs go through `save_for_backward`, so activation checkpointing and offload
(saved-tensor hooks) see them as they see PyTorch's own nodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import torch
from torch.utils.checkpoint import checkpoint, set_checkpoint_early_stop

from bwd_suite.suite.step.backends import Backends


@dataclass(frozen=True)
class NodeOp:
    op: str  # the op whose backward the node's backward calls
    forward: Callable[..., tuple]
    contract: Callable[..., tuple]
    grads: Callable[..., tuple]
    native: Optional[Callable[..., tuple]] = None


@dataclass(frozen=True)
class Plan:
    """What one forward of a run does: whose backwards it calls, which layer kinds it
    recomputes in the backward, and how the stateful layer cuts the sequence."""

    backends: Backends
    checkpoint: frozenset = frozenset()  # layer kinds under torch.utils.checkpoint
    chunks: tuple = ()  # chunk lengths of the stateful layer, the last taking the rest
    # torch.utils.checkpoint's preserve_rng_state: a recomputed dropout draws its mask
    # again from the RNG state the forward had (False only to plant that bug in tests)
    preserve_rng: bool = True

    def layer(self, kind: str, fn: Callable, *args):
        """fn(*args), recomputed in the backward when `kind` is checkpointed."""
        if kind in self.checkpoint:
            # no early stop: the whole layer's forward is recomputed, as the checkpoint
            # check counts its FLOPs (PyTorch's default stops once the last saved tensor is
            # back, skipping a layer's last op under native autograd)
            with set_checkpoint_early_stop(False):
                return checkpoint(fn, *args, use_reentrant=False,
                                  preserve_rng_state=self.preserve_rng)
        return fn(*args)


class _OpFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, node: NodeOp, backends: Backends, attrs: dict, *tensors):
        outputs, saved = node.forward(*tensors, **attrs)
        kept = {k: v for k, v in saved.items() if isinstance(v, torch.Tensor)}
        ctx.node, ctx.backends, ctx.attrs = node, backends, attrs
        ctx.keys = list(kept)
        ctx.other = {k: v for k, v in saved.items() if not isinstance(v, torch.Tensor)}
        ctx.save_for_backward(*kept.values())
        return outputs if len(outputs) > 1 else outputs[0]

    @staticmethod
    def backward(ctx, *grad_outputs):
        saved = dict(zip(ctx.keys, ctx.saved_tensors), **ctx.other)
        params, inputs = ctx.node.contract(saved, grad_outputs, ctx.attrs)
        results = ctx.backends.call(ctx.node.op, params, inputs)
        return (None, None, None, *ctx.node.grads(results, saved, ctx.attrs))


def apply(node: NodeOp, plan: Plan, *tensors, **attrs):
    """The node's outputs (one tensor, or a tuple), on the autograd graph: its backward the
    run's choice through the op's contract, or autograd's in a native run."""
    if plan.backends.native and node.native is not None:
        outputs = node.native(*tensors, **attrs)
        return outputs if len(outputs) > 1 else outputs[0]
    return _OpFunction.apply(node, plan.backends, attrs, *tensors)
