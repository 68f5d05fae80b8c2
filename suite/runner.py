"""Run one case against implementations: correctness, determinism, timing, one row each.

Per case, once: inputs in the case dtype and layout, the float64 golden of those very
values, and the yardstick implementation's error. Per implementation: a call into
poisoned outputs, the input-unchanged check, the per-output verdicts, R-1 repeat calls
for determinism, the op's statistics of the item (`OpSpec.case_stats`, where declared),
then timing of the backward call alone, its wall time as a training loop sees it and, on
CUDA, the kernels one call launches (suite/launches.py). An implementation that raises
gets verdict `error` with its message; the run goes on, unless the error lost the
process's CUDA context: later items are then errors naming it (suite/cuda_fault.py). A
failing item whose op has a diagnosis hook gets its wrong elements localised and a
one-line likely cause (suite/diagnosis.py).
"""

from __future__ import annotations

import json
import math
import time
import traceback
from dataclasses import dataclass, field
from typing import Callable, Iterator, Mapping, Optional, Sequence

import torch

from bwd_suite.suite import cuda_fault, memory, registry, tolerances
from bwd_suite.suite.cases import Case
from bwd_suite.suite.diagnosis import diagnose_item
from bwd_suite.suite.inputs import DTYPES, generator, perturbed, poison_
from bwd_suite.suite.opspec import CaseInputs, OpSpec, call_once, map_tensors, tensor_list
from bwd_suite.suite.outcomes import Determinism, FailureKind, Verdict
from bwd_suite.suite.registry import Implementation
from bwd_suite.suite.results import params_json
from bwd_suite.suite.roofline import Ceilings, roofline, same_bytes_copy_s
from bwd_suite.suite.rows import ResultRow, RunInfo
from bwd_suite.suite.launches import count_launches
from bwd_suite.suite.timing import DEFAULT_WARMUP_S, time_call, wall_time
from bwd_suite.suite.verdicts import (OutputCheck, check_output, classify_determinism, flat,
                            golden_scale, modified_inputs, normalized_error, snapshot)


@dataclass(frozen=True)
class RunOptions:
    device: torch.device
    golden_device: torch.device
    repeats: int = 3  # calls on the same inputs for the determinism check (first included)
    timing: bool = True
    warmup: int = 3
    warmup_s: float = DEFAULT_WARMUP_S  # and on CUDA at least this long (suite/timing.py)
    samples: int = 20
    max_time_s: float = 1.0
    l2_flush: str = "clean"  # suite.timing.L2_FLUSH_MODES


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclass
class CaseContext:
    """Everything about one case that every implementation shares."""

    spec: OpSpec
    case: Case
    opts: RunOptions
    inputs: CaseInputs = field(init=False)
    golden: dict = field(init=False)
    ref_errs: Optional[dict] = field(init=False, default=None)
    ref_failure: str = field(init=False, default="")

    def __post_init__(self):
        p = self.case.params
        self.inputs = self.spec.make_inputs(p, self.case.seed, self.opts.device)
        # before the golden: a case the device cannot hold is the harness's limit
        short = memory.shortfall(memory.case_need(self.spec, self.inputs, p, self.opts.repeats),
                                 self.opts.device, self.opts.golden_device)
        if short:
            raise CaseRefused(f"case refused: {short}")
        # not kept: on a case of GPT-2 large's 774M parameters the float64 inputs alone are
        # 31 GB, and the conditioning's perturbed copy as much again
        self.golden = self.spec.golden(**self.float64_inputs(), **self.inputs.attrs)
        self.outputs = list(self.spec.outputs(p))
        self.cond_errs = self._conditioning()
        missing = {o.name for o in self.outputs} - set(self.golden)
        if missing:
            raise RuntimeError(f"golden of {self.spec.name} did not produce {sorted(missing)}")
        self.case_dtype = DTYPES[p[self.spec.dtype_param]]
        self._check_range()

    def _check_range(self) -> None:
        """Refuse a case whose exact result no output of its dtype can hold: every
        implementation would fail it, which says nothing about any of them."""
        empties = dict(self.spec.empty_outputs(self.inputs, self.case.params))
        empties.update({k: self.inputs.tensors[k] for k in self.spec.mutates})
        for o in self.outputs:
            dtype = output_dtype(empties[o.name])
            gold = flat(self.golden[o.name])
            top = gold.abs().max().item() if gold.numel() else 0
            if dtype.is_floating_point and top > torch.finfo(dtype).max:
                raise CaseRefused(f"case refused: the exact {o.name} reaches {top:.3g}, "
                                  f"beyond {str(dtype).removeprefix('torch.')}'s largest "
                                  f"value {torch.finfo(dtype).max:.6g}")

    def float64_inputs(self) -> dict:
        """The inputs as the golden sees them (floating ones in float64) on the golden
        device; made afresh on each call."""
        gd = self.opts.golden_device
        return {k: map_tensors(lambda t: t.to(gd, torch.float64) if t.is_floating_point()
                               else t.to(gd), v)
                for k, v in self.inputs.tensors.items()}

    def _conditioning(self) -> dict:
        """Movement of the golden under one fp32 rounding of every floating input, and
        its distance to the op's alternate golden (over COND_FACTOR), whichever is larger."""
        gen = generator(self.case.seed)
        eps = torch.finfo(torch.float32).eps
        gd = self.opts.golden_device
        # tensor by tensor from the case's inputs: never a second whole float64 copy
        moved = {k: map_tensors(lambda t: perturbed(t.to(gd, torch.float64), eps, gen)
                                if t.is_floating_point() else t.to(gd), v)
                 for k, v in self.inputs.tensors.items()}
        other = self.spec.golden(**moved, **self.inputs.attrs)
        errs = {o.name: normalized_error(other[o.name], self.golden[o.name])
                for o in self.outputs}
        del moved, other
        if self.spec.alternate_golden is not None:
            # a second legitimate truth: its distance widens the bound by itself
            alt = self.spec.alternate_golden(**self.float64_inputs(), **self.inputs.attrs)
            for o in self.outputs:
                if o.name in alt:
                    spread = normalized_error(alt[o.name], self.golden[o.name])
                    errs[o.name] = max(errs[o.name], spread / tolerances.COND_FACTOR)
        return errs

    def yardstick_note(self, outputs: Mapping[str, torch.Tensor]) -> Optional[str]:
        """Which outputs' bound came from fp32 with one rounding because the yardstick was
        worse (suite/tolerances.py), in words; None when none did."""
        if self.ref_errs is None:
            return None
        weak = []
        for o in self.outputs:
            ref, cond = self.ref_errs[o.name], self.cond_errs[o.name]
            dtype = output_dtype(outputs[o.name])
            scale = golden_scale(self.golden[o.name])
            if tolerances.weak_yardstick(o.tol_class, dtype, self.case_dtype, ref, cond, scale):
                weak.append(f"{o.name} ({ref:.2g} > "
                            f"{tolerances.fp32_error(o.tol_class, dtype, cond, scale):.2g})")
        if not weak:
            return None
        return (f"yardstick {self.spec.yardstick} worse than fp32 with one rounding on "
                f"{', '.join(weak)}: those bounds use the fp32 error")

    def yardstick_errors(self, impls_by_name: Mapping[str, Implementation]) -> dict:
        if self.ref_errs is None:
            ys = impls_by_name.get(self.spec.yardstick) or next(
                i for i in registry.implementations(self.spec.name)
                if i.name == self.spec.yardstick)
            try:
                out, _ = _call(self.spec, ys.fn, self.inputs, self.case.params)
                self.ref_errs = {o.name: normalized_error(out[o.name], self.golden[o.name])
                                 for o in self.outputs}
            except Exception as e:  # noqa: BLE001 - recorded, and every item says so
                memory.note(e)
                self.ref_failure = f"yardstick {ys.name} raised {type(e).__name__}: {e}"
                self.ref_errs = {o.name: float("nan") for o in self.outputs}
        return self.ref_errs


def _row(run: Optional[RunInfo], case: Case, impl: Implementation, spec: OpSpec,
         device: Optional[str] = None) -> ResultRow:
    p = case.params
    return ResultRow.start(run, op=case.op, case_id=case.id, case_group=case.group,
                           case_file=case.file, tags=sorted(case.tags),
                           params_json=params_json(p), seed=case.seed, impl=impl.name,
                           impl_kind=impl.kind, impl_version=impl.version,
                           known_failure=impl.known_failure(case.id, device, p),
                           bytes=_count(spec.bytes, p), flops=_count(spec.flops, p))


def _count(fn: Callable[[Mapping], int], params: Mapping) -> Optional[int]:
    """The op's byte or flop count; None where it raises (a run item then raises it again
    as its error, in `_check`)."""
    try:
        return fn(params)
    except Exception:  # noqa: BLE001 - re-raised where the row can hold it
        return None


def output_dtype(v) -> torch.dtype:
    """The dtype of an output, or of the first tensor of a list output."""
    return (v[0] if isinstance(v, (list, tuple)) else v).dtype


def _copy(t: torch.Tensor) -> torch.Tensor:
    """A copy with the same strides (a slice of a wider buffer stays one)."""
    c = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device)
    return c.copy_(t)


def _copied_names(spec: OpSpec, also: Sequence[str]) -> tuple:
    """The inputs a call gets copies of: those the op updates or consumes, and `also`."""
    return spec.copied + tuple(also)


def fresh_inputs(spec: OpSpec, inputs: CaseInputs, also: Sequence[str] = ()) -> CaseInputs:
    """`inputs` with fresh copies of those the op updates in place or consumes, and of
    `also` (the others shared): every call, repeats and timed samples included, starts
    from the case's values."""
    names = _copied_names(spec, also)
    if not names:
        return inputs
    tensors = dict(inputs.tensors)
    for k in names:
        tensors[k] = map_tensors(_copy, tensors[k])
    return CaseInputs(tensors=tensors, attrs=inputs.attrs)


def restore_(copies: CaseInputs, spec: OpSpec, inputs: CaseInputs,
             also: Sequence[str] = ()) -> None:
    """Copy the case's values back into `copies` (made by `fresh_inputs` with the same
    `also`), in place: the same tensors step after step, as a training loop's optimizer
    sees them."""
    for k in _copied_names(spec, also):
        dst, src = copies.tensors[k], inputs.tensors[k]
        if isinstance(dst, (list, tuple)):
            pairs = [(d, s) for d, s in zip(dst, src) if isinstance(d, torch.Tensor)]
            if pairs:
                torch._foreach_copy_([d for d, _ in pairs], [s for _, s in pairs])
        elif isinstance(dst, torch.Tensor):
            dst.copy_(src)


def timed_call(spec: OpSpec, impl: Implementation, inputs: CaseInputs,
               params: Mapping) -> Callable[[], object]:
    """The call the suite times, as a zero-argument closure: the implementation's backward
    alone, its outputs allocated once outside (not poisoned: timing never sees the NaN
    fill). Scripts that profile or time an item outside a run use this. For an op that
    updates or consumes inputs the closure has a `setup` attribute, which restores the
    case's values into copies made once: the timer runs it before every call, outside the
    timed region. Copies made afresh each time would be cold in the host's caches where a
    training loop's are warm (a step over 4000 tensors read 20000 just-made TensorImpls)."""
    aliases = dict(impl.in_place)
    keep = _Aliased(aliases)  # outputs allocated once, not poisoned; aliased ones bound
    if spec.copied or aliases:
        state = {"inputs": inputs, "copies": None}

        def setup():
            copies = state["copies"]
            if copies is None:
                copies = state["copies"] = fresh_inputs(spec, inputs, also=aliases.values())
            else:
                restore_(copies, spec, inputs, also=aliases.values())
            # new list objects each call: an implementation that replaced a list's
            # element does not leave it there for the next call
            state["inputs"] = CaseInputs(
                tensors={k: list(v) if isinstance(v, (list, tuple)) else v
                         for k, v in copies.tensors.items()}, attrs=copies.attrs)

        def call():
            i = state["inputs"]
            if spec.invoke is call_once and not aliases:
                return impl.fn(**i.tensors, **i.attrs, out=out)
            return spec.call(impl.fn, i, params, keep)

        out = spec.empty_outputs(inputs, params)
        call.setup = setup
        return call
    if spec.invoke is call_once:
        out = spec.empty_outputs(inputs, params)
        return lambda: impl.fn(**inputs.tensors, **inputs.attrs, out=out)
    return lambda: spec.call(impl.fn, inputs, params, keep)


class _Aliased:
    """An allocator that takes the empties as they are, except the outputs an in-place
    implementation writes into an input (Implementation.in_place): those are the input's
    tensor of this call."""

    def __init__(self, aliases: Mapping[str, str]):
        self.aliases = dict(aliases)

    def __call__(self, empties: Mapping[str, torch.Tensor], inputs=None) -> dict:
        out = dict(empties)
        out.update({name: inputs.tensors[src] for name, src in self.aliases.items()})
        return out


def _not_run(row: ResultRow, impl: Implementation, case: Case, opts: RunOptions) -> bool:
    """Finish `row` without a call when the item cannot run: outside the implementation's
    features or device, or after this process lost its CUDA context."""
    reason = impl.unsupported_reason(case.params, opts.device.type)
    if reason:
        row.finish(Verdict.UNSUPPORTED, reason, duration_s=0.0)
    elif cuda_fault.lost_at():
        row.finish(Verdict.ERROR, cuda_fault.not_run_reason(), FailureKind.EXCEPTION,
                   duration_s=0.0)
    return row.verdict is not None


class _Outputs(_Aliased):
    """The allocator handed to `OpSpec.call`: NaN-poisoned outputs, remembered, so that an
    implementation that put its own tensor into `out` (or deleted one) instead of writing
    the one it was given is caught, and the given ones are what gets checked."""

    def __init__(self, aliases: Optional[Mapping[str, str]] = None,
                 device: Optional[torch.device] = None):
        super().__init__(aliases or {})
        self.given: list[tuple[dict, dict]] = []  # (the dict handed out, its tensors)
        # CUDA: the most memory a call allocated beyond what existed when its outputs were
        # handed out (inputs, copies, outputs): the implementation's own temporaries
        self.device = device if device is not None and device.type == "cuda" else None
        self._base: Optional[int] = None
        self._peak = 0

    def _close(self) -> None:
        if self.device is not None and self._base is not None:
            self._peak = max(self._peak, torch.cuda.max_memory_allocated(self.device) - self._base)

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
        # an in-place implementation's output is the (fresh copy of the) input it
        # overwrites: read first, so never poisoned
        out = super().__call__({k: poison_(v) for k, v in empties.items()
                                if k not in self.aliases}, inputs)
        self.given.append((out, {k: (v, _handed(v), _kept(v)) for k, v in out.items()}))
        if self.device is not None:  # a micro-batch's call starts: its own peak from here
            self._close()
            torch.cuda.reset_peak_memory_stats(self.device)
            self._base = torch.cuda.memory_allocated(self.device)
        return out

    def replaced(self) -> list[str]:
        """Outputs not the tensor handed out any more (replaced, removed, or given other
        storage), by name."""
        return sorted({k for out, orig in self.given for k, (t, handed, _) in orig.items()
                       if out.get(k) is not t or _handed(t) != handed})

    def restore(self) -> None:
        """Put the storage handed out back, so its (unwritten) values are checked."""
        for out, orig in self.given:
            out.update({k: kept for k, (_, _, kept) in orig.items()})


def storage_signature(t: torch.Tensor) -> tuple:
    """Where a tensor's elements live: its storage (pointer and size), offset, shape,
    strides and dtype. An implementation that swaps the storage under the same Python
    object (`t.data = other`, `t.set_(other)`, `t.resize_(...)`) changes it."""
    st = t.untyped_storage()
    return (st.data_ptr(), st.nbytes(), t.storage_offset(), tuple(t.shape), t.stride(),
            t.dtype)


def _handed(v) -> list:
    """(id, storage signature) of each tensor handed to a call, to find replaced ones."""
    return [(id(t), storage_signature(t)) for t in tensor_list(v)]


def _kept(v):
    """Views of the storage handed out (`detach` shares it): what gets checked when the
    implementation swapped the storage under the tensor it was given."""
    if isinstance(v, (list, tuple)):
        return [t.detach() if isinstance(t, torch.Tensor) else t for t in v]
    return v.detach() if isinstance(v, torch.Tensor) else v


def _call(spec: OpSpec, fn, inputs: CaseInputs, params: Mapping,
          alloc: Optional[_Outputs] = None) -> tuple[dict, list]:
    """One call into fresh poisoned outputs and fresh copies of the inputs it updates in
    place: (outputs, names the implementation replaced). The updated copies are outputs of
    their input's name; a list element replaced or a tensor given new storage (`p.data =
    ...`) is a replacement, and the tensors handed out are what gets checked. `alloc`:
    the allocator (its aliases: the implementation's outputs written into inputs, and
    what it measures); a plain one by default."""
    alloc = alloc if alloc is not None else _Outputs()
    given = fresh_inputs(spec, inputs, also=alloc.aliases.values())
    handed = {k: _handed(given.tensors[k]) for k in spec.mutates}
    orig = {k: tensor_list(_kept(given.tensors[k])) for k in spec.mutates}
    out = spec.call(fn, given, params, alloc)
    replaced = alloc.replaced()
    if replaced:
        alloc.restore()
        if spec.invoke is call_once:
            out = alloc.given[0][0]
    for k in spec.mutates:
        now = given.tensors[k]
        if now is None:  # an optional input this case does not have
            continue
        if _handed(now) != handed[k]:
            replaced = sorted(set(replaced) | {k})
        out = dict(out)
        out[k] = orig[k] if isinstance(now, (list, tuple)) else orig[k][0]
    return out, replaced


class _Stage:
    """What the item was doing, for the reason of an exception."""

    now = "setting up"


def run_item(ctx: CaseContext, impl: Implementation, run: Optional[RunInfo],
             ceilings: Ceilings, impls_by_name: Mapping[str, Implementation]) -> ResultRow:
    """One item's row. Every exception of the item, at whatever stage, is its `error` row;
    only KeyboardInterrupt and the like go through."""
    row = _row(run, ctx.case, impl, ctx.spec, ctx.opts.device.type)
    started = time.perf_counter()
    if _not_run(row, impl, ctx.case, ctx.opts):
        return row
    stage = _Stage()
    try:
        _check(row, ctx, impl, impls_by_name, stage)
        if ctx.opts.timing and row.verdict is not Verdict.ERROR:
            stage.now = "being timed"
            _time(row, ctx.spec, impl, ctx, ceilings)
    except Exception as e:  # noqa: BLE001 - the row keeps the message
        _raised(row, e, stage.now, ctx, impl)
    row.duration_s = time.perf_counter() - started
    return row


def _raised(row: ResultRow, e: Exception, stage: str, ctx: CaseContext,
            impl: Implementation) -> None:
    tb = traceback.extract_tb(e.__traceback__)
    where = f" ({tb[-1].filename.rsplit('/', 1)[-1]}:{tb[-1].lineno})" if tb else ""
    sticky = cuda_fault.note(e, f"{ctx.case.id} [{impl.name}]")
    memory.note(e)  # the worker restarts before its next item
    lost = "; the CUDA context is lost: later items of this process are not run"
    while_ = "" if stage == "being called" else f" while {stage}"
    row.finish(Verdict.ERROR, f"{type(e).__name__}{while_}: {e}{where}" + (lost if sticky else ""),
               FailureKind.EXCEPTION)


def _check(row: ResultRow, ctx: CaseContext, impl: Implementation,
           impls_by_name: Mapping[str, Implementation], stage: _Stage) -> None:
    """Correctness: the call into poisoned outputs, the verdict per output, inputs unchanged,
    outputs not replaced, determinism over the repeats, and the diagnosis of a failure."""
    spec, case, opts = ctx.spec, ctx.case, ctx.opts
    stage.now = "counting its bytes and flops"
    row.bytes, row.flops = spec.bytes(case.params), spec.flops(case.params)
    stage.now = "computing the yardstick's error"
    ref_errs = ctx.yardstick_errors(impls_by_name)
    if ctx.ref_failure:
        if impl.name == spec.yardstick:  # the implementation under test raised
            row.finish(Verdict.ERROR, ctx.ref_failure, FailureKind.EXCEPTION)
        else:
            row.finish(Verdict.ERROR, f"harness: {ctx.ref_failure}: without its error there "
                                      f"is no bound to judge {impl.name} by (not run)",
                       FailureKind.HARNESS)
        return
    before = snapshot(ctx.inputs.tensors)
    dev = opts.device
    stage.now = "being called"
    alloc = _Outputs(impl.in_place, dev)
    first, replaced = _call(spec, impl.fn, ctx.inputs, case.params, alloc)
    _sync(dev)
    row.peak_mem_bytes = alloc.temporaries()
    repeats = []
    for _ in range(opts.repeats - 1):
        out, again = _call(spec, impl.fn, ctx.inputs, case.params, _Outputs(impl.in_place))
        repeats.append(out)
        replaced = sorted(set(replaced) | set(again))
    _sync(dev)

    stage.now = "checking its outputs"
    own = impl.name == spec.yardstick
    checks: list[OutputCheck] = [
        check_output(o, first[o.name], ctx.golden[o.name], ref_errs[o.name], ctx.case_dtype,
                     ctx.cond_errs[o.name], is_yardstick=own)
        for o in ctx.outputs]
    row.yardstick_note = ctx.yardstick_note(first)
    row.outputs = [c.as_row() for c in checks]
    failures = [(c.failure, c.message) for c in checks if c.failure]
    in_place = [k for k in replaced if k in spec.mutates]
    if in_place:
        failures.insert(0, (FailureKind.REPLACED,
                            f"input replaced, not updated in place: the implementation gave "
                            f"{in_place} new tensors or storage instead of writing the ones "
                            f"it was given"))
    if len(in_place) < len(replaced):
        failures.insert(0, (FailureKind.REPLACED,
                            f"output replaced, not written: the implementation put its own "
                            f"tensor into (or removed from) "
                            f"out{[k for k in replaced if k not in in_place]} instead of "
                            f"writing the one it was given"))
    changed = modified_inputs(before, ctx.inputs.tensors)
    if changed:
        failures.insert(0, (FailureKind.INPUT_MODIFIED,
                            f"input modified: the implementation wrote into {changed}"))
        # later implementations must see the original values: rebuild them from the seed
        ctx.inputs = spec.make_inputs(case.params, case.seed, opts.device)

    stage.now = "checking its determinism"
    det = classify_determinism({o.name: first[o.name] for o in ctx.outputs},
                               [{o.name: r[o.name] for o in ctx.outputs} for r in repeats],
                               ctx.golden, {c.name: c.allowed for c in checks})
    row.determinism, row.det_repeats, row.det_spread = det.result, det.repeats, det.spread
    if det.result is Determinism.BITWISE and any(c.n_unwritten for c in checks):
        # poison repeated bit for bit is not a reproducible result
        row.determinism = Determinism.FAIL
    if det.result is Determinism.FAIL or (
            impl.deterministic and det.result is Determinism.NONDETERMINISTIC):
        claim = " (the implementation claims bitwise reductions)" if impl.deterministic else ""
        failures.append((FailureKind.NONDETERMINISTIC, det.message + claim))

    if failures:
        row.finish(Verdict.FAIL, "; ".join(m for _, m in failures), failures[0][0])
        _diagnose(row, ctx, first, checks)
    else:
        row.finish(Verdict.PASS)
    if spec.case_stats is not None:
        given = CaseInputs(tensors={k: before.get(k) for k in ctx.inputs.tensors},
                           attrs=ctx.inputs.attrs)
        row.stats_json = case_stats_json(spec, case.params, given, first, ctx.golden)


def case_stats_json(spec: OpSpec, params: Mapping, inputs: CaseInputs, outputs: Mapping,
                    golden: Mapping) -> str:
    """The op's statistics of an item as a JSON object, never fatal: a NaN or infinite
    value is left out (JSON has none), and a hook that raises gives {"error": "..."}."""
    try:
        stats = spec.case_stats(params, inputs, outputs, golden)
        kept = {}
        for k, v in dict(stats).items():
            v = v.item() if isinstance(v, torch.Tensor) else v
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise TypeError(f"statistic {k!r} is {type(v).__name__}, not a number")
            if isinstance(v, float) and not math.isfinite(v):
                continue
            kept[str(k)] = v if isinstance(v, int) else float(v)
        return json.dumps(kept, sort_keys=True)
    except Exception as e:  # noqa: BLE001 - a statistics bug must not lose the verdict
        return json.dumps({"error": f"{type(e).__name__}: {e}"})


def _time(row: ResultRow, spec: OpSpec, impl: Implementation, ctx: CaseContext,
          ceilings: Ceilings) -> None:
    """The timing and roofline columns: the backward call alone, then a device copy of the
    case's bytes timed alike (a yardstick of the case's own size), then the call's wall
    time and kernel launches."""
    opts = ctx.opts
    how = dict(warmup=opts.warmup, warmup_s=opts.warmup_s, repeats=opts.samples,
               max_time_s=opts.max_time_s, l2_flush=opts.l2_flush)
    call = timed_call(spec, impl, ctx.inputs, ctx.case.params)
    timing = time_call(call, opts.device, setup=getattr(call, "setup", None), **how)
    roof = roofline(row.bytes, row.flops, timing.median_s, ceilings)
    copy_s = same_bytes_copy_s(opts.device, row.bytes, **how)
    row.timing_method, row.time_samples_s = timing.method, list(timing.samples_s)
    row.time_median_s, row.time_iqr_s = timing.median_s, timing.iqr_s
    row.time_warmup, row.l2_flush, row.timing_pacing = (timing.warmup, timing.l2_flush,
                                                        timing.pacing)
    row.host_load = timing.host_load
    # a training loop's view of one call: on CPU perf_counter around the call is that
    # already; on CUDA host time to a synchronize, then the kernels one call launches
    if opts.device.type == "cuda":
        setup = getattr(call, "setup", None)
        row.wall_median_ms = 1e3 * wall_time(call, opts.device, setup=setup,
                                             repeats=len(timing.samples_s))
        row.launches = count_launches(call, opts.device, setup=setup)
    else:
        row.wall_median_ms = 1e3 * timing.median_s
    row.gbps, row.copy_gbps, row.frac_copy_bw = roof.gbps, ceilings.copy_gbps, roof.frac_copy_bw
    row.same_copy_s = copy_s
    row.frac_same_copy = copy_s / timing.median_s if copy_s and timing.median_s else None
    row.arith_intensity, row.bound = roof.arith_intensity, roof.bound


def _diagnose(row: ResultRow, ctx: CaseContext, outputs: Mapping, checks: list) -> None:
    """Localisation and likely cause of the wrong outputs (op hook), never fatal."""
    spec = ctx.spec
    if spec.diagnosis is None or not any(c.failure for c in checks):
        return
    try:
        found = diagnose_item(spec.diagnosis, ctx.case.params, ctx.float64_inputs(),
                              ctx.inputs.attrs, ctx.golden, outputs, checks)
    except Exception as e:  # noqa: BLE001 - a diagnosis bug must not lose the verdict
        row.diagnosis = f"diagnosis failed: {type(e).__name__}: {e}"
        return
    row.diagnosis, row.diagnosis_cause = found.text, found.cause
    row.error_locations, row.error_terms = found.location_records, found.term_records


class CaseRefused(Exception):
    """The case itself cannot be judged (its exact result does not fit its output dtype):
    every implementation's row is `unsupported` with the reason."""


@dataclass(frozen=True)
class Refused:
    reason: str


def case_context(spec: OpSpec, case: Case, opts: RunOptions) -> "CaseContext | Refused | str":
    """The case's shared context, a refusal of the case, or why the context could not be
    built (an error row's reason)."""
    try:
        return CaseContext(spec, case, opts)
    except CaseRefused as e:
        return Refused(str(e))
    except Exception as e:  # noqa: BLE001 - a broken input factory or golden is an error row
        cuda_fault.note(e, f"{case.id} (case setup)")
        memory.note(e)
        return (f"harness: the case's inputs or float64 golden could not be built: "
                f"{type(e).__name__}: {e}")


class ContextCache:
    """The last case's context (or its setup failure), for items of one case that arrive
    one at a time (pytest's); the previous case's tensors are freed first."""

    def __init__(self):
        self._key, self._value = None, None

    def get(self, spec: OpSpec, case: Case, opts: RunOptions) -> "CaseContext | Refused | str":
        key = (spec.name, case.id, case.file, opts)
        if key != self._key:
            self._key, self._value = None, None
            self._value, self._key = case_context(spec, case, opts), key
        return self._value


def run_case(spec: OpSpec, case: Case, impls: list, opts: RunOptions,
             run: Optional[RunInfo], ceilings: Ceilings,
             contexts: Optional[ContextCache] = None) -> Iterator[ResultRow]:
    """Rows for every implementation of one case. Inputs and golden are built once, and
    only when some implementation can run the case."""
    by_name = {i.name: i for i in impls}
    contexts = contexts if contexts is not None else ContextCache()
    for impl in impls:
        row = _row(run, case, impl, spec, opts.device.type)
        if _not_run(row, impl, case, opts):
            yield row
            continue
        ctx = contexts.get(spec, case, opts)
        if isinstance(ctx, Refused):
            yield row.finish(Verdict.UNSUPPORTED, ctx.reason, duration_s=0.0)
        elif isinstance(ctx, str):
            yield row.finish(Verdict.ERROR, ctx, FailureKind.HARNESS, duration_s=0.0)
        else:
            yield run_item(ctx, impl, run, ceilings, by_name)
