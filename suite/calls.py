"""The call contract: how the harness calls an implementation, described once.

An implementation is called in destination-passing style (suite/opspec.py). What one call
of it gets, and what is checked after it:

- **Inputs**: the case's own tensors, shared; except copies holding the case's values of
  those it updates in place or consumes (`OpSpec.mutates`, `consumes`) and of those it
  writes an output into (`Implementation.in_place`).
- **Outputs**: the op's empties (`OpSpec.empty_outputs`), handed to `OpSpec.invoke`
  through an allocator: NaN-poisoned and fresh for a checked call, so that an element
  never written is found; allocated once and never poisoned for the timed call. An output
  written into an input is that input's copy (read first, so never poisoned).
- **After a checked call**: every tensor handed out (outputs and updated inputs) must still
  be the one handed out, in the storage handed out (`storage_signature`): anything else is
  a replacement, and the storage handed out is what gets checked.
- **Timed call**: the copies are made once and the case's values restored into them by
  `setup`, which the timer runs before every sample, outside the timed region.
- **Two phases** (`Implementation.prepare`): the implementation's forward runs once,
  untimed, and returns what its backward needs (`saved`: an autograd graph kept alive, or
  o and lse); the bytes it saved beyond the case's inputs are measured (`saved_bytes`).
  The checked and timed calls are then `fn(**inputs, **attrs, saved=saved)`, which returns
  its outputs: tensors it allocated, fresh each call (a repeat that returns the first
  call's storage is `stale`). Its outputs cannot be poisoned before the call, so the
  memory they are likely to get is: the caching allocator hands a freed block of the same
  size back, so blocks of the outputs' sizes are poisoned and freed just before.

`Call` is that contract for one implementation on one case's inputs; the runner asks it
for a checked call (`checked`) and for the timed closure (`timed`). A new stage of the
contract (an untimed preparation before a timed backward) belongs here, used by both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

import torch

from bwd_suite.suite import values
from bwd_suite.suite.inputs import poison_
from bwd_suite.suite.opspec import CaseInputs, OpSpec, call_once


def storage_signature(t: torch.Tensor) -> tuple:
    """Where a tensor's elements live: its storage (pointer and size), offset, shape,
    strides and dtype. An implementation that swaps the storage under the same Python
    object (`t.data = other`, `t.set_(other)`, `t.resize_(...)`) changes it."""
    st = t.untyped_storage()
    return (st.data_ptr(), st.nbytes(), t.storage_offset(), tuple(t.shape), t.stride(),
            t.dtype)


def _handed(v) -> list:
    """(id, storage signature) of each tensor of a value handed to a call."""
    return [(id(t), storage_signature(t)) for t in values.tensors(v)]


def _kept(v):
    """Views of the storage handed out (`detach` shares it): what gets checked when the
    implementation swapped the storage under the tensor it was given."""
    return values.map_tensors(torch.Tensor.detach, v)


def _copy(t: torch.Tensor) -> torch.Tensor:
    """A copy with the same strides (a slice of a wider buffer stays one)."""
    c = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device)
    return c.copy_(t)


def _storage_key(t: torch.Tensor) -> tuple:
    st = t.untyped_storage()
    return (t.device.type, t.device.index, st.data_ptr())


def _graph_tensors(roots) -> list:
    """The tensors the autograd graphs behind `roots` keep for their backward: each node's
    `_saved_*` attributes (PyTorch's own nodes) and `saved_tensors` (a custom Function)."""
    found, seen, todo = [], set(), [t.grad_fn for t in roots if t.grad_fn is not None]
    while todo:
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        names = [n for n in dir(node) if n.startswith("_saved_")]
        for name in names + (["saved_tensors"] if hasattr(node, "saved_tensors") else []):
            try:
                v = getattr(node, name)
            except RuntimeError:  # freed already, or not a tensor PyTorch exposes
                continue
            found += [x for x in (v if isinstance(v, (list, tuple)) else [v])
                      if isinstance(x, torch.Tensor)]
        todo += [n for n, _ in node.next_functions]
    return found


def _reachable(obj) -> list:
    """The tensors in `obj`, through dicts, lists and tuples."""
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, Mapping):
        obj = list(obj.values())
    if isinstance(obj, (list, tuple)):
        return [t for x in obj for t in _reachable(x)]
    return []


def saved_bytes(saved, inputs: CaseInputs) -> int:
    """Bytes of the distinct storages that `saved` keeps alive (its tensors and the autograd
    graphs behind them), less the case's inputs' storages: what a forward saved for its
    backward beyond what the caller holds anyway."""
    own = {_storage_key(t) for v in inputs.tensors.values() for t in values.tensors(v)}
    tensors = _reachable(saved)
    sizes = {}
    for t in tensors + _graph_tensors(tensors):
        key = _storage_key(t)
        if key not in own:
            sizes[key] = t.untyped_storage().nbytes()
    return sum(sizes.values())


def _poison_pool(empties: Mapping) -> None:
    """Poison and free blocks of the outputs' sizes, which the caching allocator hands to
    the next allocations of those sizes: a returned output's unwritten elements then show."""
    blocks = [poison_(t) for v in empties.values() for t in values.tensors(v)]
    del blocks


def _returned(result, empties: Mapping, name: str) -> dict:
    """The outputs a two-phase implementation returned, checked against the op's empties:
    every output present, of its shape and dtype."""
    if not isinstance(result, Mapping):
        raise TypeError(f"{name} returned {type(result).__name__}, not a dict of its outputs "
                        f"({', '.join(empties)})")
    missing = [k for k in empties if k not in result]
    if missing:
        raise TypeError(f"{name} returned no {missing} (outputs: {', '.join(empties)})")
    out = {}
    for k, want in empties.items():
        got = result[k]
        for g, w in zip(values.tensors(got), values.tensors(want)):
            if not isinstance(g, torch.Tensor) or g.shape != w.shape or g.dtype != w.dtype:
                what = (f"{tuple(g.shape)} {g.dtype}" if isinstance(g, torch.Tensor)
                        else type(g).__name__)
                raise TypeError(f"{name} returned {k} as {what}, not {tuple(w.shape)} "
                                f"{w.dtype}")
        out[k] = got
    return out


@dataclass
class Prepared:
    """What a two-phase implementation's untimed forward left: `saved`, and its bytes."""

    saved: Any
    bytes: int


class Allocator:
    """Hands `OpSpec.invoke` each call's outputs: the empties as they are, except the
    outputs an in-place implementation writes into an input, which are that input's tensor
    of this call."""

    def __init__(self, aliases: Optional[Mapping[str, str]] = None):
        self.aliases = dict(aliases or {})

    def __call__(self, empties: Mapping[str, torch.Tensor], inputs=None) -> dict:
        out = dict(empties)
        out.update({name: inputs.tensors[src] for name, src in self.aliases.items()})
        return out


class CheckingAllocator(Allocator):
    """The allocator of a checked call: NaN-poisoned outputs, remembered with where their
    storage is, so that an implementation that put its own tensor into `out` (or deleted
    one, or gave one other storage) instead of writing the one it was given is caught, and
    the storage handed out is what gets checked. On CUDA it also measures the most memory
    a call allocated beyond what existed when its outputs were handed out (inputs, copies,
    outputs): the implementation's own temporaries."""

    def __init__(self, aliases: Optional[Mapping[str, str]] = None,
                 device: Optional[torch.device] = None):
        super().__init__(aliases)
        self.given: list[tuple[dict, dict]] = []  # (the dict handed out, its tensors)
        self.device = device if device is not None and device.type == "cuda" else None
        self._base: Optional[int] = None
        self._peak = 0

    def _close(self) -> None:
        if self.device is not None and self._base is not None:
            self._peak = max(self._peak,
                             torch.cuda.max_memory_allocated(self.device) - self._base)

    def temporaries(self) -> Optional[int]:
        """Bytes the implementation allocated on top of its inputs and outputs, at most
        (after the call has finished: synchronize first); None off CUDA."""
        if self.device is None:
            return None
        self._close()
        return self._peak

    def __call__(self, empties: Mapping[str, torch.Tensor], inputs=None) -> dict:
        if self.aliases and isinstance(empties, dict):
            # the empty an aliased output does not use is freed before the base is taken,
            # or the implementation's own temporaries would hide below it
            for k in self.aliases:
                empties.pop(k, None)
        out = super().__call__({k: poison_(v) for k, v in empties.items()
                                if k not in self.aliases}, inputs)
        self.given.append((out, {k: (v, _handed(v), _kept(v)) for k, v in out.items()}))
        self.start()
        return out

    def start(self) -> None:
        """A call starts (or a micro-batch's call): its own peak from here."""
        if self.device is not None:
            self._close()
            torch.cuda.reset_peak_memory_stats(self.device)
            self._base = torch.cuda.memory_allocated(self.device)

    def replaced(self) -> list[str]:
        """Outputs not the tensor handed out any more (replaced, removed, or given other
        storage), by name."""
        return sorted({k for out, orig in self.given for k, (t, handed, _) in orig.items()
                       if out.get(k) is not t or _handed(t) != handed})

    def restore(self) -> None:
        """Put the storage handed out back, so its (unwritten) values are checked."""
        for out, orig in self.given:
            out.update({k: kept for k, (_, _, kept) in orig.items()})


@dataclass
class Checked:
    """What one checked call left: its outputs (updated inputs included, under their
    names), the names it replaced instead of writing, and its allocator (temporaries)."""

    outputs: dict
    replaced: list
    allocator: CheckingAllocator


@dataclass(frozen=True)
class Call:
    """The contract of one implementation's calls on one case's inputs."""

    spec: OpSpec
    fn: Callable
    inputs: CaseInputs  # the case's
    params: Mapping
    aliases: Mapping[str, str] = field(default_factory=dict)  # output -> input written into

    prepare: Optional[Callable] = None  # the untimed first phase (Implementation.prepare)
    name: str = "the implementation"

    @classmethod
    def of(cls, spec: OpSpec, impl, inputs: CaseInputs, params: Mapping) -> "Call":
        prepare = getattr(impl, "prepare", None)
        if prepare is not None and spec.invoke is not call_once:
            raise TypeError(f"{impl.name} has two phases, but {spec.name} splits a case "
                            f"into several calls: no prepared state fits them all")
        return cls(spec, impl.fn, inputs, params, dict(impl.in_place), prepare,
                   getattr(impl, "name", "the implementation"))

    @property
    def two_phase(self) -> bool:
        return self.prepare is not None

    def prepared(self) -> Prepared:
        """The first phase on the case's inputs (untimed): what it saved, and its bytes."""
        saved = self.prepare(**self.inputs.tensors, **self.inputs.attrs)
        return Prepared(saved, saved_bytes(saved, self.inputs))

    @property
    def copied(self) -> tuple:
        """The inputs each call gets copies of: those the op updates or consumes, and those
        an output is written into."""
        return self.spec.copied + tuple(self.aliases.values())

    @property
    def direct(self) -> bool:
        """One plain call with the outputs given (no allocator in the timed region)."""
        return self.spec.invoke is call_once and not self.aliases

    def fresh(self) -> CaseInputs:
        """The case's inputs with fresh copies of those the call gets copies of: every
        call, repeats and timed samples included, starts from the case's values."""
        if not self.copied:
            return self.inputs
        tensors = dict(self.inputs.tensors)
        for k in self.copied:
            tensors[k] = values.map_tensors(_copy, tensors[k])
        return CaseInputs(tensors=tensors, attrs=self.inputs.attrs)

    def restore(self, copies: CaseInputs) -> None:
        """Copy the case's values back into `copies` (made by `fresh`), in place: the same
        tensors step after step, as a training loop's optimizer sees them."""
        for k in self.copied:
            pairs = list(zip(values.tensors(copies.tensors[k]),
                             values.tensors(self.inputs.tensors[k])))
            if pairs:
                torch._foreach_copy_([d for d, _ in pairs], [s for _, s in pairs])

    def checked(self, device: Optional[torch.device] = None,
                prepared: Optional[Prepared] = None) -> Checked:
        """One call into fresh poisoned outputs and fresh copies (`device`: where to
        measure the temporaries). The updated copies are outputs of their input's name; a
        list element replaced or a tensor given new storage is a replacement, and the
        storage handed out is what gets checked. Two phases: the call with `prepared`'s
        saved state (prepared now when not given), its returned outputs checked for shape
        and dtype."""
        alloc = CheckingAllocator(self.aliases, device)
        given = self.fresh()
        mutates = [k for k in self.spec.mutates if given.tensors[k] is not None]
        handed = {k: _handed(given.tensors[k]) for k in mutates}
        kept = {k: _kept(given.tensors[k]) for k in mutates}
        replaced = []
        if self.two_phase:
            saved = (prepared or self.prepared()).saved
            empties = self.spec.empty_outputs(given, self.params)
            _poison_pool(empties)
            alloc.start()
            result = self.fn(**given.tensors, **given.attrs, saved=saved)
            out = _returned(result, empties, self.name)
        else:
            out = self.spec.call(self.fn, given, self.params, alloc)
            replaced = alloc.replaced()
            if replaced:
                alloc.restore()
                if self.spec.invoke is call_once:
                    out = alloc.given[0][0]
        out = dict(out)
        for k in mutates:
            if _handed(given.tensors[k]) != handed[k]:
                replaced = sorted(set(replaced) | {k})
            out[k] = kept[k]
        return Checked(out, replaced, alloc)

    def stale(self, first: Mapping, repeats: list) -> list[str]:
        """Outputs of a two-phase call that a repeat returned in the first call's storage
        (still alive, so no fresh allocation can have it): computed once and handed back,
        not computed by each call."""
        if not self.two_phase:
            return []
        return sorted({k for r in repeats for k, v in r.items() if k in first
                       and {_storage_key(t) for t in values.tensors(v)}
                       & {_storage_key(t) for t in values.tensors(first[k])}})

    def timed(self) -> Callable[[], object]:
        """The call the suite times, as a zero-argument closure: the implementation's
        backward alone, its outputs allocated once outside (not poisoned: timing never
        sees the NaN fill). With copies, the closure has a `setup` that restores the
        case's values into copies made once, which the timer runs before every call,
        outside the timed region: copies made afresh each time would be cold in the host's
        caches where a training loop's are warm (a step over 4000 tensors read 20000
        just-made TensorImpls)."""
        keep = Allocator(self.aliases)  # outputs allocated once; aliased ones bound
        if self.two_phase:
            saved = self.prepared().saved
            if not self.copied:
                inputs = self.inputs
                return lambda: self.fn(**inputs.tensors, **inputs.attrs, saved=saved)
        out = self.spec.empty_outputs(self.inputs, self.params) \
            if self.direct and not self.two_phase else None
        if not self.copied:
            inputs = self.inputs
            if self.direct:
                return lambda: self.fn(**inputs.tensors, **inputs.attrs, out=out)
            return lambda: self.spec.call(self.fn, inputs, self.params, keep)
        state = {"inputs": self.inputs, "copies": None}

        def setup():
            copies = state["copies"]
            if copies is None:
                copies = state["copies"] = self.fresh()
            else:
                self.restore(copies)
            # new list objects each call: an implementation that replaced a list's
            # element does not leave it there for the next call
            state["inputs"] = CaseInputs(
                tensors={k: values.map_tensors(lambda t: t, v)
                         for k, v in copies.tensors.items()}, attrs=copies.attrs)

        def call():
            i = state["inputs"]
            if self.two_phase:
                return self.fn(**i.tensors, **i.attrs, saved=saved)
            if self.direct:
                return self.fn(**i.tensors, **i.attrs, out=out)
            return self.spec.call(self.fn, i, self.params, keep)

        call.setup = setup
        return call


def timed_call(spec: OpSpec, impl, inputs: CaseInputs, params: Mapping) -> Callable[[], object]:
    """The timed closure of `impl` on `inputs` (Call.timed): what scripts that profile or
    time an item outside a run use."""
    return Call.of(spec, impl, inputs, params).timed()
