"""The model kinds a scenario can train, each described once by the package that builds it
(ops/blocks/), as an op describes itself with an OpSpec: the engine knows a model only
through its `ModelSpec`, and the loss and optimizer only through `Training`.

A model is an `nn.Module` called as `model(tokens, plan)` (suite/step/node.py's Plan: the
backends of this run, which layers recompute, how the stateful layer is chunked) that
returns the logits (B * T, V); its op nodes call each op's backward through the plan's
backends, so the same model runs with eager PyTorch, our kernels or the float64 goldens.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

from bwd_suite.suite.errors import SuiteInputError, did_you_mean
from bwd_suite.suite.params import ParamSet


@dataclass(frozen=True)
class Training:
    """The loss and the optimizer of the step, through the ops' contracts.

    batch(params, seed, device) -> (tokens (B, T) int64, labels (B, T) int64 with masked
        positions at the ignore index, not yet shifted)
    scored(labels) -> how many positions the loss scores (the global-token denominator)
    loss(backends, logits, labels, weight) -> weight * (sum of the scored tokens' losses),
        a 0-d tensor on the graph (its backward scales the logits' gradient by weight)
    optimizer -> an object with `state(params, dtype)` (the tensors it keeps per parameter:
        a dict name -> list, `master` None without master weights) and
        `step(backends, params, grads, state, count, hyper) -> bool` (found an inf or NaN:
        nothing changed)
    """

    batch: Callable[[Mapping, int, Any], tuple]
    scored: Callable[[Any], int]
    loss: Callable[..., Any]
    optimizer: Any
    ops: tuple  # the ops the loss and the optimizer call


@dataclass(frozen=True)
class ModelSpec:
    # --- metadata ---
    name: str  # the `model` of a scenario file
    doc: str  # one line

    # --- vocabulary ---
    params: ParamSet  # the scenario keys that shape the model (dims, layers, vocabulary)
    # params -> (key, reason) for an impossible model, or None
    check: Callable[[Mapping], Optional[tuple]]
    # the layer kinds `checkpoint` may name, each a kind of submodule the model recomputes
    # in the backward when named (e.g. "block", "mixer", "mlp")
    layers: tuple
    # the ops its nodes call (a scenario's [impl] keys must be among these and the
    # training's)
    ops: tuple

    # --- building ---
    # (params, seed) -> {parameter name: fp32 tensor}, values the run's dtype represents
    # exactly (every run and the float64 shadow start from the same numbers)
    init: Callable[[Mapping, int], dict]
    # (params, dtype, device) -> nn.Module whose named parameters are those of `init`
    build: Callable[[Mapping, Any, Any], Any]
    training: Training

    # --- memory and flops models (docs/step.md#memory-ledger) ---
    # (params, batch, seq, dtype, checkpoint layers, micro_batches) -> bytes the graph keeps
    # from the forward to the backward (activations the backward reads, the loss's
    # dlogits), by the block's shapes
    saved_bytes: Callable[..., int]
    # the module-name suffixes of each layer kind, for the flops it recomputes:
    # {layer: regex of the module names (FlopCounterMode's) of such layers}
    layer_modules: Mapping[str, str] = field(default_factory=dict)

    # params -> the blocks a gradient passes back through (the step ceiling's depth growth,
    # suite/tolerances.py)
    depth: Callable[[Mapping], int] = field(default=lambda p: 1)

    # --- the stateful layer (chunked-state check) ---
    # True when the model has a layer that carries state along the sequence and honours
    # Plan.chunks (the chunked_state check); False: that check does not apply
    stateful: bool = False
    # params -> whether the forward draws random numbers (dropout): micro-batches then draw
    # other masks than the whole batch
    draws: Callable[[Mapping], bool] = field(default=lambda p: False)

    def __post_init__(self):
        if not self.name.isidentifier():
            raise ValueError(f"model name {self.name!r} must be an identifier")
        if not self.layers:
            raise ValueError(f"model {self.name}: names no layers")
        missing = set(self.layer_modules) - set(self.layers)
        if missing:
            raise ValueError(f"model {self.name}: layer_modules for unknown layers {missing}")

    @property
    def all_ops(self) -> tuple:
        """Every op whose implementation a run of this model chooses."""
        return tuple(dict.fromkeys(self.ops + self.training.ops))


_MODELS: dict[str, ModelSpec] = {}


def register_model(spec: ModelSpec) -> ModelSpec:
    if spec.name in _MODELS and _MODELS[spec.name] is not spec:
        raise ValueError(f"model {spec.name} registered twice")
    _MODELS[spec.name] = spec
    return spec


def models() -> dict[str, ModelSpec]:
    """Every registered model (discovering the packages that register them)."""
    from bwd_suite.suite import registry

    registry.discover()
    return dict(sorted(_MODELS.items()))


def model(name: str, where: str = "model") -> ModelSpec:
    known = models()
    if name not in known:
        raise SuiteInputError(where, did_you_mean(name, known))
    return known[name]
