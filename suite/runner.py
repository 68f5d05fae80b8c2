"""Run one case against implementations: correctness, determinism, timing, one row each.

Per case, once: inputs in the case dtype and layout, the float64 golden of those very
values, and the yardstick implementation's error. Per implementation: a call into
poisoned outputs, the input-unchanged check, the per-output verdicts, R-1 repeat calls
for determinism, then timing of the backward call alone. An implementation that raises
gets verdict `error` with its message; the run goes on, unless the error lost the
process's CUDA context: later items are then errors naming it (suite/cuda_fault.py). A
failing item whose op has a diagnosis hook gets its wrong elements localised and a
one-line likely cause (suite/diagnosis.py).
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, field
from typing import Iterator, Mapping, Optional

import torch

from suite import cuda_fault, registry
from suite.cases import Case
from suite.diagnosis import diagnose_item, empty_row_fields
from suite.inputs import DTYPES, generator, perturbed, poison_
from suite.opspec import CaseInputs, OpSpec, call_once
from suite.registry import Implementation
from suite.results import params_json
from suite.roofline import Ceilings, roofline, same_bytes_copy_s
from suite.timing import DEFAULT_WARMUP_S, time_call
from suite.verdicts import (Determinism, FailureKind, OutputCheck, Verdict, check_output,
                            classify_determinism, modified_inputs, normalized_error, snapshot)


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


def _poisoned(empties: Mapping[str, torch.Tensor]) -> dict:
    return {k: poison_(v) for k, v in empties.items()}


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
        gd = self.opts.golden_device
        f64 = {k: (v.to(gd, torch.float64) if isinstance(v, torch.Tensor)
                   and v.is_floating_point() else
                   (v.to(gd) if isinstance(v, torch.Tensor) else v))
               for k, v in self.inputs.tensors.items()}
        self.golden = self.spec.golden(**f64, **self.inputs.attrs)
        self.f64 = f64  # the inputs the golden saw, for the diagnosis of failing items
        self.outputs = list(self.spec.outputs(p))
        self.cond_errs = self._conditioning(f64)
        missing = {o.name for o in self.outputs} - set(self.golden)
        if missing:
            raise RuntimeError(f"golden of {self.spec.name} did not produce {sorted(missing)}")
        self.case_dtype = DTYPES[p[self.spec.dtype_param]]

    def _conditioning(self, f64: Mapping) -> dict:
        """Movement of the golden under one fp32 rounding of every floating input."""
        gen = generator(self.case.seed)
        eps = torch.finfo(torch.float32).eps
        moved = {k: perturbed(v, eps, gen) if isinstance(v, torch.Tensor)
                 and v.is_floating_point() else v for k, v in f64.items()}
        other = self.spec.golden(**moved, **self.inputs.attrs)
        return {o.name: normalized_error(other[o.name], self.golden[o.name])
                for o in self.outputs}

    def yardstick_errors(self, impls_by_name: Mapping[str, Implementation]) -> dict:
        if self.ref_errs is None:
            ys = impls_by_name.get(self.spec.yardstick) or next(
                i for i in registry.implementations(self.spec.name)
                if i.name == self.spec.yardstick)
            try:
                out = self.spec.call(ys.fn, self.inputs, self.case.params, _poisoned)
                self.ref_errs = {o.name: normalized_error(out[o.name], self.golden[o.name])
                                 for o in self.outputs}
            except Exception as e:  # noqa: BLE001 - recorded, and every item says so
                self.ref_failure = f"yardstick {ys.name} raised {type(e).__name__}: {e}"
                self.ref_errs = {o.name: float("nan") for o in self.outputs}
        return self.ref_errs


def _base_row(env: Mapping, case: Case, impl: Implementation, spec: OpSpec) -> dict:
    p = case.params
    return dict(env, op=case.op, case_id=case.id, case_group=case.group, case_file=case.file,
                tags=sorted(case.tags), params_json=params_json(p), seed=case.seed,
                impl=impl.name, impl_kind=impl.kind, impl_version=impl.version,
                verdict=None, failure_kind=None, reason="", outputs=[],
                determinism=Determinism.NOT_CHECKED.value, det_repeats=0, det_spread=None,
                timing_method=None, time_samples_s=[], time_median_s=None, time_iqr_s=None,
                time_warmup=None, l2_flush=None, timing_pacing=None, bytes=spec.bytes(p),
                flops=spec.flops(p),
                gbps=None, copy_gbps=None, frac_copy_bw=None, same_copy_s=None,
                frac_same_copy=None, arith_intensity=None,
                bound=None, peak_mem_bytes=None, duration_s=None, **empty_row_fields())


def _timed_call(spec: OpSpec, impl: Implementation, ctx: CaseContext):
    """A zero-argument closure running the backward only, outputs allocated outside."""
    t, p = ctx.inputs, ctx.case.params
    if spec.invoke is call_once:
        out = spec.empty_outputs(t, p)
        return lambda: impl.fn(**t.tensors, **t.attrs, out=out)
    return lambda: spec.call(impl.fn, t, p, lambda empties: dict(empties))


def run_item(ctx: CaseContext, impl: Implementation, env: Mapping, ceilings: Ceilings,
             impls_by_name: Mapping[str, Implementation]) -> dict:
    spec, case, opts = ctx.spec, ctx.case, ctx.opts
    row = _base_row(env, case, impl, spec)
    started = time.perf_counter()
    reason = impl.unsupported_reason(case.params, opts.device.type)
    if reason:
        row.update(verdict=Verdict.UNSUPPORTED.value, reason=reason, duration_s=0.0)
        return row

    if cuda_fault.lost_at():
        row.update(verdict=Verdict.ERROR.value, failure_kind=FailureKind.EXCEPTION.value,
                   reason=cuda_fault.not_run_reason(), duration_s=0.0)
        return row

    ref_errs = ctx.yardstick_errors(impls_by_name)
    before = snapshot(ctx.inputs.tensors)
    dev = opts.device
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
        base_mem = torch.cuda.memory_allocated(dev)
    try:
        first = spec.call(impl.fn, ctx.inputs, case.params, _poisoned)
        _sync(dev)
        if dev.type == "cuda":
            row["peak_mem_bytes"] = torch.cuda.max_memory_allocated(dev) - base_mem
        repeats = []
        for _ in range(opts.repeats - 1):
            repeats.append(spec.call(impl.fn, ctx.inputs, case.params, _poisoned))
        _sync(dev)
    except Exception as e:  # noqa: BLE001 - the verdict keeps the message
        tb = traceback.extract_tb(e.__traceback__)[-1]
        sticky = cuda_fault.note(e, f"{case.id} [{impl.name}]")
        row.update(verdict=Verdict.ERROR.value, failure_kind=FailureKind.EXCEPTION.value,
                   reason=f"{type(e).__name__}: {e} ({tb.filename.rsplit('/', 1)[-1]}:"
                          f"{tb.lineno})" + ("; the CUDA context is lost: later items of "
                                             "this process are not run" if sticky else ""),
                   duration_s=time.perf_counter() - started)
        return row

    checks: list[OutputCheck] = [
        check_output(o, first[o.name], ctx.golden[o.name], ref_errs[o.name], ctx.case_dtype,
                     ctx.cond_errs[o.name])
        for o in ctx.outputs]
    row["outputs"] = [c.as_row() for c in checks]
    failures = [(c.failure, c.message) for c in checks if c.failure]
    changed = modified_inputs(before, ctx.inputs.tensors)
    if changed:
        failures.insert(0, (FailureKind.INPUT_MODIFIED,
                            f"input modified: the implementation wrote into {changed}"))
        # later implementations must see the original values: rebuild them from the seed
        ctx.inputs = spec.make_inputs(case.params, case.seed, opts.device)

    det = classify_determinism({o.name: first[o.name] for o in ctx.outputs},
                               [{o.name: r[o.name] for o in ctx.outputs} for r in repeats],
                               ctx.golden, {c.name: c.allowed for c in checks})
    row.update(determinism=det.result.value, det_repeats=det.repeats, det_spread=det.spread)
    if det.result is Determinism.FAIL or (
            impl.deterministic and det.result is Determinism.NONDETERMINISTIC):
        claim = " (the implementation claims bitwise reductions)" if impl.deterministic else ""
        failures.append((FailureKind.NONDETERMINISTIC, det.message + claim))

    if ctx.ref_failure:
        failures.append((FailureKind.EXCEPTION, ctx.ref_failure))
    if failures:
        row.update(verdict=Verdict.FAIL.value, failure_kind=failures[0][0].value,
                   reason="; ".join(m for _, m in failures))
        row.update(_diagnosis(ctx, first, checks))
    else:
        row["verdict"] = Verdict.PASS.value

    if opts.timing:
        how = dict(warmup=opts.warmup, warmup_s=opts.warmup_s, repeats=opts.samples,
                   max_time_s=opts.max_time_s, l2_flush=opts.l2_flush)
        timing = time_call(_timed_call(spec, impl, ctx), dev, **how)
        roof = roofline(row["bytes"], row["flops"], timing.median_s, ceilings)
        # a yardstick of the case's size: a device copy of its bytes, timed alike
        copy_s = same_bytes_copy_s(dev, row["bytes"], **how)
        frac_same = copy_s / timing.median_s if copy_s and timing.median_s else None
        row.update(timing_method=timing.method, time_samples_s=list(timing.samples_s),
                   time_median_s=timing.median_s, time_iqr_s=timing.iqr_s,
                   time_warmup=timing.warmup, l2_flush=timing.l2_flush,
                   timing_pacing=timing.pacing, gbps=roof.gbps,
                   copy_gbps=ceilings.copy_gbps, frac_copy_bw=roof.frac_copy_bw,
                   same_copy_s=copy_s, frac_same_copy=frac_same,
                   arith_intensity=roof.arith_intensity, bound=roof.bound)
    row["duration_s"] = time.perf_counter() - started
    return row


def _diagnosis(ctx: CaseContext, outputs: Mapping, checks: list) -> dict:
    """Localisation and likely cause of the wrong outputs (op hook), never fatal."""
    spec = ctx.spec
    if spec.diagnosis is None or not any(c.failure for c in checks):
        return {}
    try:
        found = diagnose_item(spec.diagnosis, ctx.case.params, ctx.f64, ctx.inputs.attrs,
                              ctx.golden, outputs, checks)
    except Exception as e:  # noqa: BLE001 - a diagnosis bug must not lose the verdict
        return {"diagnosis": f"diagnosis failed: {type(e).__name__}: {e}"}
    return found.row_fields()


def run_case(spec: OpSpec, case: Case, impls: list, opts: RunOptions, env: Mapping,
             ceilings: Ceilings) -> Iterator[dict]:
    """Rows for every implementation of one case (inputs and golden built once)."""
    by_name = {i.name: i for i in impls}
    ctx, failed = None, None
    if not cuda_fault.lost_at():
        try:
            ctx = CaseContext(spec, case, opts)
        except Exception as e:  # noqa: BLE001 - a broken input factory or golden is an error row
            cuda_fault.note(e, f"{case.id} (case setup)")
            failed = f"case setup failed: {type(e).__name__}: {e}"
    if ctx is None:
        for impl in impls:
            row = _base_row(env, case, impl, spec)
            reason = impl.unsupported_reason(case.params, opts.device.type)
            if reason:
                row.update(verdict=Verdict.UNSUPPORTED.value, reason=reason, duration_s=0.0)
            else:
                row.update(verdict=Verdict.ERROR.value, failure_kind=FailureKind.EXCEPTION.value,
                           reason=failed or cuda_fault.not_run_reason(), duration_s=0.0)
            yield row
        return
    for impl in impls:
        yield run_item(ctx, impl, env, ceilings, by_name)
