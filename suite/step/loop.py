"""The training loop of one run: a model, its optimizer state, and the full step of seed 001.

One step: the gradients cleared; per micro-batch the forward, the loss (cross entropy of
the shifted, masked labels, times the loss scale and divided by the batch's scored tokens:
the global-token denominator, or the micro-batch's own with the per-micro-batch-mean bug),
the scaled backward; then the optimizer (unscale, skip on inf, clip, AdamW on fp32 master
weights, the parameters cast back), its step count advanced only when it did not skip.
16-bit parameters get fp32 main gradients (Megatron's main_grad): each parameter's
gradient is added into its fp32 accumulator as soon as the backward has it (a post-
accumulate-grad hook) and dropped, so micro-batches accumulate in fp32, not in 16 bits.

Every run of a scenario starts from the same parameters and data, and seeds the RNG the same
way before each micro-batch's forward, so a dropout mask is the same in every run of the
same batch (and recomputed alike by torch.utils.checkpoint, which restores the RNG state).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional

import torch

from bwd_suite.suite.step import offload
from bwd_suite.suite.step.backends import Backends
from bwd_suite.suite.step.models import ModelSpec
from bwd_suite.suite.step.node import Plan

# the optimizer's hyper-parameters among a scenario's keys
HYPER = ("lr", "beta1", "beta2", "eps", "weight_decay", "max_norm", "loss_scale")
STATE = ("params", "master", "exp_avg", "exp_avg_sq")  # what the optimizer updates


@dataclass(frozen=True)
class Variant:
    """What a run changes against the plain step."""

    name: str = "plain"
    checkpoint: frozenset = frozenset()  # layer kinds recomputed in the backward
    offload: bool = False  # saved activations kept on the host (suite/step/offload.py)
    micro_batches: int = 1
    per_micro_batch_mean: bool = False  # each micro-batch divided by its own tokens, then k
    chunks: tuple = ()  # the stateful layer's chunk lengths
    overflow_step: int = 0  # this step's gradient gets an inf before the optimizer
    preserve_rng: bool = True  # torch.utils.checkpoint's (False only to plant a bug)


PLAIN = Variant()


@dataclass
class StepRecord:
    step: int
    loss: torch.Tensor  # 0-d: the mean loss over the batch's scored tokens
    grads: dict  # name -> gradient times the loss scale (fp32 main gradient of 16-bit ones)
    params: dict  # name -> the parameter after the step (its fp32 master where it has one)
    exp_avg: dict
    exp_avg_sq: dict
    found_inf: bool
    state: dict = field(default_factory=dict)  # STATE name -> {name: tensor} after the step
    before: Optional[dict] = None  # the same before the optimizer (overflow step only)

    def quantity(self, q: str) -> dict:
        return {"loss": {"loss": self.loss}, "grads": self.grads, "params": self.params,
                "exp_avg": self.exp_avg, "exp_avg_sq": self.exp_avg_sq}[q]


class _NoStages:
    def __call__(self, name: str):
        return contextlib.nullcontext()


NO_STAGES = _NoStages()


def step_seed(seed: int, step: int, micro_batch: int) -> int:
    return (seed * 7919 + step * 101 + micro_batch) % 2 ** 63


class Run:
    """One model trained step by step with one choice of backwards and one variant."""

    def __init__(self, spec: ModelSpec, params: Mapping, backends: Backends, dtype,
                 device, init: Mapping, batch: tuple, variant: Variant = PLAIN,
                 seed: int = 0):
        self.spec, self.params, self.backends = spec, params, backends
        self.dtype, self.device = dtype, torch.device(device)
        self.variant, self.seed = variant, seed
        self.model = spec.build(params, dtype, self.device)
        named = dict(self.model.named_parameters())
        if set(named) != set(init):
            raise ValueError(f"model {spec.name}: parameters {sorted(named)} but init gives "
                             f"{sorted(init)}")
        with torch.no_grad():
            for name, p in named.items():
                p.copy_(init[name])
        self.names = list(named)
        self.tensors = [named[n] for n in self.names]
        self.main = None  # fp32 main gradients of 16-bit parameters
        if dtype in (torch.bfloat16, torch.float16):
            self.main = [torch.zeros_like(x, dtype=torch.float32) for x in self.tensors]
            for x, acc in zip(self.tensors, self.main):
                x.register_post_accumulate_grad_hook(self._into(acc))
        self.optimizer = spec.training.optimizer
        self.state = self.optimizer.state(self.tensors, dtype)
        self.count = 1  # the step count of the optimizer's next update
        self.tokens, self.labels = batch
        self.hyper = {k: params[k] for k in HYPER}

    @staticmethod
    def _into(acc: torch.Tensor):
        def hook(param):
            acc.add_(param.grad)
            param.grad = None
        return hook

    def _offload(self):
        if not self.variant.offload:
            return contextlib.nullcontext()
        return offload.on_host(self.device)

    def _lists(self) -> dict:
        lists = {"params": self.tensors, **{k: self.state.get(k) for k in STATE[1:]}}
        return {k: [x.detach() for x in v] for k, v in lists.items() if v is not None}

    def _state(self) -> dict:
        return {k: dict(zip(self.names, v)) for k, v in self._lists().items()}

    def step(self, t: int, stages: Callable = NO_STAGES,
             perturb: Optional[Callable[[list], None]] = None) -> StepRecord:
        """Step t; `perturb(grads)` moves the gradients in place before the optimizer (the
        float64 model's conditioning runs), after the record took them."""
        v, training = self.variant, self.spec.training
        scale = self.params["loss_scale"]
        for x in self.tensors:
            x.grad = None
        for acc in self.main or ():
            acc.zero_()
        plan = Plan(self.backends, v.checkpoint, v.chunks, v.preserve_rng)
        k = v.micro_batches
        whole = max(training.scored(self.labels), 1)
        total = torch.zeros((), dtype=torch.float64, device=self.device)
        for i, (tokens, labels) in enumerate(zip(self.tokens.chunk(k), self.labels.chunk(k))):
            denominator = k * max(training.scored(labels), 1) if v.per_micro_batch_mean \
                else whole
            torch.manual_seed(step_seed(self.seed, t, i))
            with self._offload():
                with stages("forward"):
                    logits = self.model(tokens, plan)
                with stages("loss"):
                    loss = training.loss(self.backends, logits, labels, scale / denominator)
                del logits
            with stages("backward"):
                loss.backward()
            total += loss.detach().to(torch.float64)
        grads = self.main if self.main is not None else [x.grad for x in self.tensors]
        kept = {n: g.detach().clone() for n, g in zip(self.names, grads)}
        before = None
        if v.overflow_step == t:
            last = grads[-1].view(-1)
            last[last.numel() // 2] = float("inf")  # an overflowed gradient element
            before = {k: {n: x.detach().clone() for n, x in d.items()}
                      for k, d in self._state().items()}
        if perturb is not None:
            perturb(grads)
        with stages("optimizer"):
            found = self.optimizer.step(self.backends, self.tensors, grads, self.state,
                                        self.count, self.hyper)
        if not found:
            self.count += 1
        state = self._state()
        master = state.get("master", state["params"])
        return StepRecord(step=t, loss=total / scale, grads=kept, params=master,
                          exp_avg=state["exp_avg"], exp_avg_sq=state["exp_avg_sq"],
                          found_inf=bool(found), state=state, before=before)
