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
one-line likely cause (suite/diagnosis/).
"""

from __future__ import annotations

import json
import math
import time
import traceback
from typing import Callable, Iterator, Mapping, Optional

import torch

from bwd_suite.suite import cuda_fault, facts, memory
from bwd_suite.suite.calls import Call
from bwd_suite.suite.cases import Case
from bwd_suite.suite.context import (CaseContext, CaseRefused, ContextCache,  # noqa: F401
                                     Refused, RunOptions, case_context, output_dtype)
from bwd_suite.suite.diagnosis import diagnose_item
from bwd_suite.suite.launches import count_launches
from bwd_suite.suite.opspec import CaseInputs, OpSpec
from bwd_suite.suite.outcomes import Determinism, FailureKind, Verdict
from bwd_suite.suite.registry import Implementation, Unsupported
from bwd_suite.suite.results import params_json
from bwd_suite.suite.roofline import Ceilings, roofline, same_bytes_copy_s
from bwd_suite.suite.rows import ResultRow, RunInfo
from bwd_suite.suite.timing import time_call, wall_time
from bwd_suite.suite.verdicts import (OutputCheck, bitwise_equal, check_output,
                                      classify_determinism, modified_inputs, snapshot)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def item_row(run: Optional[RunInfo], case: Case, impl: Implementation, spec: OpSpec,
         device: Optional[str] = None) -> ResultRow:
    p = case.params
    return ResultRow.start(run, op=case.op, case_id=case.id, case_group=case.group,
                           case_file=case.file, tags=sorted(case.tags),
                           params_json=params_json(p), seed=case.seed, impl=impl.name,
                           impl_kind=impl.kind, impl_origin=impl.origin or None,
                           impl_version=impl.version,
                           known_failure=impl.known_failure(case.id, device, p),
                           bytes=_count(spec.bytes, p), flops=_count(spec.flops, p))


def _count(fn: Callable[[Mapping], int], params: Mapping) -> Optional[int]:
    """The op's byte or flop count; None where it raises (a run item then raises it again
    as its error, in `_check`)."""
    try:
        return fn(params)
    except Exception:  # noqa: BLE001 - re-raised where the row can hold it
        return None


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


class _Stage:
    """What the item was doing, for the reason of an exception."""

    now = "setting up"


def run_item(ctx: CaseContext, impl: Implementation, run: Optional[RunInfo],
             ceilings: Ceilings, impls_by_name: Mapping[str, Implementation]) -> ResultRow:
    """One item's row. Every exception of the item, at whatever stage, is its `error` row;
    only KeyboardInterrupt and the like go through."""
    row = item_row(run, ctx.case, impl, ctx.spec, ctx.opts.device.type)
    started = time.perf_counter()
    if _not_run(row, impl, ctx.case, ctx.opts):
        return row
    stage = _Stage()
    try:
        _check(row, ctx, impl, impls_by_name, stage)
        if ctx.opts.timing and row.verdict not in (Verdict.ERROR, Verdict.UNSUPPORTED):
            stage.now = "being timed"
            _time(row, ctx.spec, impl, ctx, ceilings)
    except Unsupported as e:  # the library refused the case when called
        row.finish(Verdict.UNSUPPORTED, f"{impl.name}: {e}")
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
    call = Call.of(spec, impl, ctx.inputs, case.params)
    prepared = None
    with facts.collecting() as reported:  # what it says of the item (suite/facts.py)
        if call.two_phase:
            stage.now = "preparing (its untimed forward)"
            prepared = call.prepared()
            row.saved_bytes = prepared.bytes
        stage.now = "being called"
        checked = call.checked(dev, prepared)
    row.impl_facts_json = facts.as_json(reported)
    _sync(dev)
    row.peak_mem_bytes = checked.allocator.temporaries()
    first, replaced, repeats = checked.outputs, checked.replaced, []
    for _ in range(opts.repeats - 1):
        again = call.checked(prepared=prepared)
        repeats.append(again.outputs)
        replaced = sorted(set(replaced) | set(again.replaced))
    _sync(dev)
    stale = call.stale(first, repeats)
    del prepared

    stage.now = "checking its outputs"
    # one rule whatever the implementation's name: the yardstick's own item included
    checks: list[OutputCheck] = [
        check_output(o, first[o.name], ctx.golden[o.name], ref_errs[o.name], ctx.case_dtype,
                     ctx.cond_errs[o.name], ctx.weak_yardstick_outputs.get(o.name))
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
    if stale:
        failures.insert(0, (FailureKind.STALE,
                            f"stale output: a repeat returned {stale} in the first call's "
                            f"storage: computed once and handed back, not by each call"))
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

    if spec.batch_variant is not None:
        stage.now = "checking its batch invariance"
        row.batch_invariant = _batch_invariant(ctx, impl, first)

    if failures:
        row.finish(Verdict.FAIL, "; ".join(m for _, m in failures), failures[0][0])
        _diagnose(row, ctx, first, checks)
    elif any(c.weak for c in checks):
        row.finish(Verdict.WEAK_YARDSTICK, "; ".join(c.message for c in checks if c.weak))
    else:
        row.finish(Verdict.PASS)
    if spec.case_stats is not None:
        given = CaseInputs(tensors={k: before.get(k) for k in ctx.inputs.tensors},
                           attrs=ctx.inputs.attrs)
        row.stats_json = case_stats_json(spec, case.params, given, first, ctx.golden)


def _batch_invariant(ctx: CaseContext, impl: Implementation, first: Mapping) -> Optional[bool]:
    """Whether the same sequences in another order (OpSpec.batch_variant) give bitwise the
    same outputs, put back in order; None where the case has nothing to reorder."""
    variant = ctx.spec.batch_variant(ctx.inputs, ctx.case.params)
    if variant is None:
        return None
    reordered, back = variant
    other = Call.of(ctx.spec, impl, reordered, ctx.case.params).checked()
    again = back({o.name: other.outputs[o.name] for o in ctx.outputs})
    return all(bitwise_equal(first[o.name], again[o.name]) for o in ctx.outputs)


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
    row.memory_bounds_json = spec.memory_bounds_json(ctx.case.params)
    how = dict(warmup=opts.warmup, warmup_s=opts.warmup_s, repeats=opts.samples,
               max_time_s=opts.max_time_s, l2_flush=opts.l2_flush)
    call = Call.of(spec, impl, ctx.inputs, ctx.case.params).timed()
    timing = time_call(call, opts.device, setup=getattr(call, "setup", None), **how)
    roof = roofline(row.bytes, row.flops, timing.median_s, ceilings,
                    dtype=ctx.case.params.get(spec.dtype_param))
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
    row.tflops, row.peak_tflops, row.frac_peak_flops = (roof.tflops, roof.peak_tflops,
                                                        roof.frac_peak_flops)


def _diagnose(row: ResultRow, ctx: CaseContext, outputs: Mapping, checks: list) -> None:
    """Localisation and likely cause of a failing item's wrong outputs (op hook), or of
    its failure kind alone (an input modified, repeats that differ), never fatal."""
    spec = ctx.spec
    if spec.diagnosis is None:
        return
    try:
        found = diagnose_item(spec.diagnosis, ctx.case.params, ctx.float64_inputs(),
                              ctx.inputs.attrs, ctx.golden, outputs, checks,
                              ctx.diagnosis_cache, row.failure_kind.value)
    except Exception as e:  # noqa: BLE001 - a diagnosis bug must not lose the verdict
        row.diagnosis = f"diagnosis failed: {type(e).__name__}: {e}"
        return
    row.diagnosis, row.diagnosis_cause = found.text, found.cause
    row.error_locations, row.error_terms = found.location_records, found.term_records


def run_case(spec: OpSpec, case: Case, impls: list, opts: RunOptions,
             run: Optional[RunInfo], ceilings: Ceilings,
             contexts: Optional[ContextCache] = None) -> Iterator[ResultRow]:
    """Rows for every implementation of one case. Inputs and golden are built once, and
    only when some implementation can run the case."""
    by_name = {i.name: i for i in impls}
    contexts = contexts if contexts is not None else ContextCache()
    for impl in impls:
        row = item_row(run, case, impl, spec, opts.device.type)
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
