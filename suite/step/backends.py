"""Which backward each op of a run calls, and the call itself.

A run chooses one implementation per op (eager PyTorch, ours, a vendor's, an outside
`op=module:object`), resolved through the registry exactly as `run --impl` resolves them;
the float64 shadow chooses every op's golden. `Backends.call(op, params, inputs)` calls the
choice through the op's contract (docs/contract.md): destination-passing into poisoned
outputs, two-phase through `prepare`, an output written into an input's storage
(`in_place`) on a copy, in-place updates (`mutates`: an optimizer) into the tensors given;
the golden's updated inputs are copied back into them the same way.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Mapping, Optional

import torch

from bwd_suite.suite import registry, values
from bwd_suite.suite.errors import SuiteInputError, did_you_mean
from bwd_suite.suite.inputs import poison_
from bwd_suite.suite.opspec import CaseInputs

GOLDEN = "golden"  # the float64 shadow's choice for every op
EAGER = "eager"  # every op's yardstick (its same-dtype eager PyTorch implementation)
OURS = "ours"  # every op's implementation of kind "ours" where it has one, else eager
# PyTorch's own autograd through the model (each node's native forward: F.layer_norm, SDPA,
# F.linear, F.conv1d; F.cross_entropy), no op contract; the optimizer as eager's
NATIVE = "native"


@dataclass(frozen=True)
class Choice:
    """One op's backward in a run: a registered (or outside) implementation, or the
    golden (impl None)."""

    op: str
    name: str  # the implementation's name, or GOLDEN
    impl: Optional[registry.Implementation] = None

    @property
    def deterministic(self) -> bool:
        return self.impl.deterministic if self.impl is not None else True

    @property
    def kind(self) -> str:
        return self.impl.kind if self.impl is not None else "reference"

    @property
    def version(self) -> str:
        return self.impl.version if self.impl is not None else ""


def yardstick_name(op: str) -> str:
    """The same-dtype eager implementation of `op` (the op's yardstick)."""
    known = registry.ops()
    if op not in known:
        raise SuiteInputError("impl", f"op {op!r} is not registered")
    return known[op].yardstick


def resolve(op: str, name: str, where: str) -> Choice:
    """The choice `name` (a registered name or `module:object`) for `op`; bad input names
    `where` (the scenario file and key, or the flag)."""
    known = registry.ops()
    if op not in known:
        raise SuiteInputError(where, did_you_mean(op, set(known)))
    if ":" in name:
        try:
            impl = registry.external_implementation(f"{op}={name}" if "=" not in name
                                                    else name, op)
        except SuiteInputError as e:
            raise SuiteInputError(where, e.what) from None
        return Choice(op, impl.name, impl=impl)
    impl = next((i for i in registry.implementations(op) if i.name == name), None)
    if impl is None:
        raise SuiteInputError(where, f"op {op} has no implementation {name!r}: "
                              + did_you_mean(name, {i.name for i in
                                                    registry.implementations(op)}))
    return Choice(op, name, impl=impl)


def ours_name(op: str) -> str:
    """The op's own implementation ("ours", first by name), else its yardstick."""
    mine = sorted(i.name for i in registry.implementations(op) if i.kind == "ours")
    return mine[0] if mine else yardstick_name(op)


def parse_set(text: str, ops: tuple, where: str) -> dict:
    """`--impl`'s value: "eager", "ours", "native", or comma-separated `op=name`
    (`op=module:object`), each op named at most once, into {op: name} for the ops it names
    (EAGER, OURS and NATIVE name them all; NATIVE as EAGER, its backends flagged native)."""
    text = text.strip()
    if text in (EAGER, NATIVE):
        return {op: yardstick_name(op) for op in ops}
    if text == OURS:
        return {op: ours_name(op) for op in ops}
    chosen = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        op, eq, name = part.partition("=")
        if not eq or not op or not name:
            raise SuiteInputError(where, f"{part!r}: expected OP=NAME (or {EAGER!r}, "
                                         f"{OURS!r}, {NATIVE!r})")
        if op in chosen:
            raise SuiteInputError(where, f"op {op} chosen twice")
        chosen[op] = name
    if not chosen:
        raise SuiteInputError(where, "names no implementation")
    return chosen


@dataclass(frozen=True)
class Backends:
    """A run's choice per op, and the device its tensors live on."""

    choices: Mapping[str, Choice]
    device: torch.device
    calls: dict = field(default_factory=dict, compare=False)  # op -> calls made
    # PyTorch's autograd through the nodes' native forwards (NATIVE): only what has no
    # native form (the optimizer) is called through its choice
    native: bool = False

    @property
    def golden(self) -> bool:
        return all(c.name == GOLDEN for c in self.choices.values())

    @property
    def nondeterministic(self) -> Optional[str]:
        """Why a backward of this run may not reproduce bit for bit, or None: a choice that
        declares it, or PyTorch's own CUDA autograd (SDPA's flash and cuDNN backwards sum
        dQ with atomics) unless torch.use_deterministic_algorithms is on."""
        for c in self.choices.values():
            if not c.deterministic:
                return f"{c.op}'s {c.name} declares a backward that is not bitwise reproducible"
        if self.native and self.device.type == "cuda" \
                and not torch.are_deterministic_algorithms_enabled():
            return ("PyTorch's CUDA autograd is not bitwise reproducible without "
                    "torch.use_deterministic_algorithms (SDPA's backward sums dQ with atomics)")
        return None

    def call(self, op: str, params: Mapping, inputs: CaseInputs) -> dict:
        """The chosen backward of `op` on `inputs` (the op's contract, `params` its case
        parameters for `supports` and `empty_outputs`): {output name: tensor}."""
        choice = self.choices[op]
        self.calls[op] = self.calls.get(op, 0) + 1
        # the graph's tensors as the harness hands inputs: off the graph (the same storage,
        # so in-place updates of `mutates` inputs reach the caller's tensors)
        inputs = CaseInputs({k: values.map_tensors(torch.Tensor.detach, v)
                             for k, v in inputs.tensors.items()}, inputs.attrs)
        # grad mode as the harness calls them (a node's forward and backward run without
        # it): eager implementations run autograd inside (torch_ref's cross entropy)
        watch = _UNSEEN[-1] if _UNSEEN and choice.kind in COMPILED else None
        before = watch[0].get_total_flops() if watch else 0
        with torch.enable_grad():
            if choice.name == GOLDEN:
                out = _call_golden(op, choice, inputs)
            else:
                out = _call_impl(choice.impl, params, inputs, self.device)
        if watch and watch[0].get_total_flops() == before:
            watch[1][0] += registry.ops()[op].flops(params)
        return out


# FLOPs FlopCounterMode cannot see: a compiled kernel (ours, a vendor's) runs no aten op.
# For each call of such an implementation during which the active counter did not move,
# the op's own count (OpSpec.flops, its roofline's) is added instead (suite/step/stages.py).
# PyTorch's own (and outside ones) are left to the counter: an elementwise-only backward
# moves it by nothing, rightly.
# A module global, not a context variable: autograd runs a CUDA backward on its own thread.
COMPILED = ("ours", "vendor")
_UNSEEN: list = []  # [(counter, box)] while counting


@contextlib.contextmanager
def unseen_flops(counter):
    """Within: the op FLOPs of calls `counter` (a FlopCounterMode) did not count, in
    box[0]."""
    box = [0]
    _UNSEEN.append((counter, box))
    try:
        yield box
    finally:
        _UNSEEN.pop()


def golden_backends(ops: tuple, device) -> Backends:
    """Every op's float64 golden."""
    choices = {op: Choice(op, GOLDEN) for op in ops}
    return Backends(choices, torch.device(device))


def _copy_back(target, result) -> None:
    """An updated input's new values into the tensors the caller holds (in place)."""
    for t, r in zip(values.tensors(target), values.tensors(result)):
        t.copy_(r)


def _call_golden(op: str, choice: Choice, inputs: CaseInputs) -> dict:
    spec = registry.ops()[op]
    out = spec.golden(**inputs.tensors, **inputs.attrs)
    for name in spec.mutates:
        if inputs.tensors.get(name) is not None and name in out:
            _copy_back(inputs.tensors[name], out[name])
    return out


def _call_impl(impl: registry.Implementation, params: Mapping, inputs: CaseInputs,
               device: torch.device) -> dict:
    why = impl.unsupported_reason(params, device.type)
    if why:
        raise registry.Unsupported(f"{impl.op}/{impl.name}: {why}")
    spec = registry.ops()[impl.op]
    tensors, attrs = dict(inputs.tensors), inputs.attrs
    if impl.prepare is not None:
        saved = impl.prepare(**tensors, **attrs)
        return impl.fn(**tensors, **attrs, saved=saved)
    out = spec.empty_outputs(inputs, params)
    for t in (x for v in out.values() for x in values.tensors(v)):
        poison_(t)  # an element the implementation never writes shows as NaN in the step
    for name, source in impl.in_place.items():
        tensors[source] = tensors[source].clone()  # it writes over its input: not ours
        out[name] = tensors[source]
    impl.fn(**tensors, **attrs, out=out)
    return out
