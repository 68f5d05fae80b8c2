"""One scenario under one choice of backwards: its runs in lockstep, its checks, its rows.

For each choice set the runs are: the float64 shadow (every op's golden) and two float64
runs whose gradients are moved at every step (the conditioning, `_conditioning`); the eager
runs (every op's yardstick: plain, and the variants whose checks are judged against
float64), whose largest error at each step sizes the bound as the ops' yardstick does; the
choice's plain run and one run per check that needs a variant (the eager ones themselves
when the choice is eager). They step together, so that each step's tensors are compared
and dropped before the next (a 124M-parameter model's state is gigabytes). A run that
raises costs the checks that need it (error, or unsupported when an implementation
refuses); the float64 runs or the eager plain run raising cost every check (harness).
With timing, the plain, checkpointed and offloaded steps are then measured alone
(suite/step/measure.py).
"""

from __future__ import annotations

import json
import time
import traceback
from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional

import torch

from bwd_suite.suite import registry, tolerances, verdicts
from bwd_suite.suite.errors import HarnessError, SuiteInputError, did_you_mean
from bwd_suite.suite.inputs import DTYPES, generator
from bwd_suite.suite.outcomes import FailureKind, Verdict
from bwd_suite.suite.profiles import STEP_KIND
from bwd_suite.suite.rows import ResultRow, RunInfo
from bwd_suite.suite.step import backends as be
from bwd_suite.suite.step import compare, measure
from bwd_suite.suite.step.checks import CHECKS, Judge
from bwd_suite.suite.step.loop import PLAIN, Run, step_seed
from bwd_suite.suite.step.scenario import Scenario

KIND_ORDER = ("ours", "vendor", "external", "mutant", "native", "reference")


@dataclass(frozen=True)
class ChoiceSet:
    """One op -> backward choice for every op a scenario's model calls."""

    label: str  # "eager", "ours", "native", or the op=name pairs that differ from eager
    choices: Mapping[str, be.Choice]
    text: str = ""  # the --impl value it came from ("" for a scenario's default)
    native: bool = False  # PyTorch's autograd through the model (be.NATIVE)

    @property
    def backends_for(self) -> Callable:
        return lambda device: be.Backends(dict(self.choices), torch.device(device),
                                          native=self.native)

    @property
    def kind(self) -> str:
        kinds = {c.kind for c in self.choices.values()}
        return next((k for k in KIND_ORDER if k in kinds), "reference")

    @property
    def version(self) -> str:
        return ",".join(sorted({c.version for c in self.choices.values() if c.version}))

    @property
    def origin(self) -> Optional[str]:
        return self.text if ":" in self.text else None


def choice_set(s: Scenario, text: Optional[str], where: str = "--impl") -> ChoiceSet:
    """`--impl`'s value (None: the scenario's own [impl] table over eager) as a ChoiceSet."""
    spec = s.spec
    ops = spec.all_ops
    eager = {op: be.yardstick_name(op) for op in ops}
    if text is None:
        names, where = dict(eager, **s.impl), s.where("impl")
    else:
        chosen = be.parse_set(text, ops, where)
        for op in chosen:
            if op not in ops and op not in registry.ops():
                raise SuiteInputError(where, f"no op {op!r}: "
                                      + did_you_mean(op, spec.all_ops))
        # a set may name ops of other models of the run (attention for a Mamba scenario)
        names = dict(eager, **{op: n for op, n in chosen.items() if op in ops})
    choices = {op: be.resolve(op, n, where) for op, n in names.items()}
    differ = {op: c.name for op, c in choices.items() if c.name != eager[op]}
    named = text.strip() if text else ""
    label = named if named in (be.EAGER, be.OURS, be.NATIVE) else (
        ",".join(f"{op}={n}" for op, n in sorted(differ.items())) or be.EAGER)
    return ChoiceSet(label, choices, text or "", native=named == be.NATIVE)


def eager_set(s: Scenario) -> ChoiceSet:
    return choice_set(s, be.EAGER)


@dataclass
class Outcome:
    """What one check of one choice gathered over the steps."""

    judged: list = field(default_factory=list)
    error: Optional[tuple] = None  # (Verdict, FailureKind or None, reason)
    note: str = ""  # how it was judged, where not as its check says first (a passing row's)


PLAIN_KEY = "plain"


class _Group:
    """The runs of one choice set, stepped together: the float64 shadow, the eager runs
    (plain, and the variant of every check judged against float64: its yardstick), and the
    choice's runs (plain, and one per check with a variant). When the choice is eager its
    runs are the eager ones."""

    def __init__(self, s: Scenario, cs: ChoiceSet, device, dtype, init, batch):
        spec = s.spec
        self.s, self.cs = s, cs
        init64 = {k: v.double() for k, v in init.items()}

        def make(backends, dt, variant, values):
            return Run(spec, s.params, backends, dt, device, values, batch, variant, s.seed)

        golden = be.golden_backends(spec.all_ops, device)
        self.shadow = make(golden, torch.float64, PLAIN, init64)
        # the float64 model with its gradients moved at every step (_conditioning)
        self.perturbed = [make(golden, torch.float64, PLAIN, init64) for _ in range(2)]
        eager = eager_set(s)
        same = dict(cs.choices) == dict(eager.choices) and cs.native == eager.native
        variants = {PLAIN_KEY: PLAIN}
        for name in s.checks:
            check = CHECKS[name]
            v = check.variant(s.params, s.checkpoint)
            if v is not None:
                variants[name] = v
            if check.judge is Judge.FLOAT64 and v is not None:
                y = check.yardstick_check
                variants.setdefault(y, CHECKS[y].variant(s.params, s.checkpoint))
        self.runs: dict = {}  # (side, variant name) -> Run; side "eager" or "choice"
        needed_eager = {PLAIN_KEY} | {CHECKS[n].yardstick_check for n in s.checks
                                      if CHECKS[n].judge is Judge.FLOAT64 and n in variants}
        for name in sorted(needed_eager, key=list(variants).index):
            self.runs[("eager", name)] = make(eager.backends_for(device), dtype,
                                              variants[name], init)
        for name in [PLAIN_KEY] + [n for n in s.checks if n in variants]:
            shared = self.runs.get(("eager", name)) if same else None
            self.runs[("choice", name)] = shared or make(cs.backends_for(device), dtype,
                                                         variants[name], init)
        # why the choice's backwards may not reproduce bit for bit, or None
        self.nondeterministic = self.runs[("choice", PLAIN_KEY)].backends.nondeterministic

    def unique(self) -> dict:
        """The distinct runs, each under its first key."""
        out, seen = {}, set()
        for key, run in self.runs.items():
            if id(run) not in seen:
                seen.add(id(run))
                out[key] = run
        return out


def _failure(e: BaseException) -> tuple:
    if isinstance(e, registry.Unsupported):
        return Verdict.UNSUPPORTED, None, str(e)
    if isinstance(e, HarnessError):
        return Verdict.ERROR, FailureKind.HARNESS, str(e)
    tail = "".join(traceback.format_exception(type(e), e, e.__traceback__)[-3:])
    return Verdict.ERROR, FailureKind.EXCEPTION, f"{type(e).__name__}: {e} | {tail[-1500:]}"


def _judged_by(judge: Judge, deterministic: bool) -> Judge:
    """A bitwise check (SAME) of a run that is not bitwise reproducible is judged against
    the float64 model instead."""
    return Judge.FLOAT64 if judge is Judge.SAME and not deterministic else judge


def _judge(judge: Judge, rec, base_rec, golden, ref, dtype, cond, depth: int):
    if judge is Judge.FLOAT64:
        return compare.against_float64(rec, golden, ref, dtype, cond=cond, depth=depth)
    if judge is Judge.LOSS:
        return compare.against_float64(rec, golden, ref, dtype, quantities=("loss",), cond=cond,
                                       depth=depth)
    if judge is Judge.SAME:
        return compare.bitwise(rec, base_rec)
    if judge is Judge.UNCHANGED:
        return compare.unchanged(rec) if rec.before is not None else []
    raise ValueError(judge)


def _pooled_ref(records: dict, golden, pooled: dict) -> dict:
    """The yardstick at this step: {(quantity, tensor): the largest error of the group's
    eager runs at this step and before} (`pooled` carries it across steps). After the first
    step a run's error is mostly where its Adam updates changed sign (gradients within
    rounding of 0: a random set of elements, other in every run), so one eager run's error
    is one sample of a random variable, and the ratio of two such samples passes 2 about a
    third of the time (the loss, one number, at once). The eager runs of the group (plain,
    micro-batches, chunks: each a correct computation of the same step) are samples of it;
    their largest error is the scale."""
    for rec in records.values():
        for key, err in compare.errors(rec, golden).items():
            pooled[key] = max(pooled.get(key, 0.0), err if err == err else 0.0)
    return dict(pooled)


def _needs(name: str, run_key: dict) -> set:
    """The runs whose records a check's verdict needs: its own, and the plain run it is
    compared with bit for bit."""
    keys = {run_key[name]}
    if CHECKS[name].judge is Judge.SAME:
        keys.add(("choice", PLAIN_KEY))
    return keys


def _harness(err: tuple, what: str) -> tuple:
    """A failure of a run the verdicts stand on (the float64 model, the eager run): the
    suite could not judge, which is no implementation's failure; an eager op that refuses
    the case stays unsupported."""
    verdict, kind, why = err
    return (verdict, FailureKind.HARNESS if verdict is Verdict.ERROR else kind,
            f"{what}: {why}")


def check_steps(s: Scenario, cs: ChoiceSet, device, init: Optional[dict] = None
                ) -> dict[str, Outcome]:
    """Every check of `s` under `cs`: {check name: Outcome}. `init`: the scenario's initial
    parameters when the caller drew them already (ModelSpec.init)."""
    dtype = DTYPES[s.params["dtype"]]
    spec = s.spec
    outcomes = {name: Outcome() for name in s.checks}

    def fail_all(err: tuple) -> dict:
        for o in outcomes.values():
            o.error = o.error or err
        return outcomes

    init = spec.init(s.params, s.seed) if init is None else init
    batch = spec.training.batch(s.params, s.seed, torch.device(device))
    try:
        group = _Group(s, cs, device, dtype, init, batch)
    except Exception as e:  # noqa: BLE001 - building a run is part of the item
        return fail_all(_failure(e))
    run_key = {n: ("choice", n if ("choice", n) in group.runs else PLAIN_KEY)
               for n in s.checks}
    eager_plain = group.runs[("eager", PLAIN_KEY)]
    live = group.unique()
    depth = spec.depth(s.params)
    pooled: dict = {}
    for t in range(1, s.params["steps"] + 1):
        try:
            golden = group.shadow.step(t)
        except Exception as e:  # noqa: BLE001 - no truth, no verdict
            return fail_all(_harness(_failure(e), "the float64 model"))
        records = {}
        for key, run in list(live.items()):
            if run.variant.overflow_step and t > run.variant.overflow_step:
                del live[key]  # diverged from the model on purpose: nothing left to compare
                continue
            try:
                records[key] = run.step(t)
            except Exception as e:  # noqa: BLE001 - costs the checks that need this run
                del live[key]
                err = _failure(e)
                mine = {k for k, r in group.runs.items() if r is run}
                for name in s.checks:
                    if mine & _needs(name, run_key):
                        outcomes[name].error = outcomes[name].error or err
                if run is eager_plain:  # no yardstick, no bound for the others
                    return fail_all(_harness(err, "the eager run"))
        full = {key: records[first] for first, r0 in live.items() if first in records
                for key, r in group.runs.items() if r is r0}
        ref = _pooled_ref({k: v for k, v in full.items() if k[0] == "eager"}, golden,
                          pooled)
        try:
            cond = _conditioning(group, golden, full[("eager", PLAIN_KEY)], ref, dtype, t,
                                 s.seed, depth)
        except Exception as e:  # noqa: BLE001 - no conditioning, no bound
            return fail_all(_harness(_failure(e), "the float64 conditioning runs"))
        deterministic = group.nondeterministic is None
        for name in s.checks:
            o, rec = outcomes[name], full.get(run_key[name])
            if o.error is not None or rec is None:
                continue
            judge = _judged_by(CHECKS[name].judge, deterministic)
            o.judged += _judge(judge, rec, full.get(("choice", PLAIN_KEY)), golden, ref,
                               dtype, cond, depth)
            if judge is not CHECKS[name].judge:
                o.note = f"against the float64 model, not bitwise: {group.nondeterministic}"
    return outcomes


def _conditioning(group: _Group, golden, eager, ref: dict, dtype, t: int, seed: int,
                  depth: int) -> dict:
    """{(quantity, tensor): absolute drift} of the float64 model's trajectory at step t when
    every step's gradients move by what the gradients' check allows the eager run
    (tolerances.step_allowed times the gradient's scale), one random sign per element, in
    one perturbed run and the opposite signs in the other: the largest drift of the two.
    Adam divides by sqrt(v), so a gradient within that error of 0 flips its update, and
    the next steps' forward and gradients move with it; no implementation can beat that."""
    deltas = []
    for name in group.shadow.names:
        gold = golden.grads[name]
        scale = verdicts.golden_scale(gold)
        allowed = tolerances.step_allowed(compare.TOL_CLASS["grads"], eager.grads[name].dtype,
                                          dtype, ref.get(("grads", name), 0.0), t, scale,
                                          depth=depth)
        deltas.append(allowed * scale)
    gen = generator(step_seed(seed, t, 99))
    signs = [torch.randint(0, 2, g.shape, generator=gen).to(g.device, g.dtype) * 2 - 1
             for g in golden.grads.values()]
    drift: dict = {}
    for run, direction in zip(group.perturbed, (1.0, -1.0)):
        def perturb(grads, direction=direction):
            for g, d, r in zip(grads, deltas, signs):
                g.add_(r * (direction * d))
        rec = run.step(t, perturb=perturb)
        for q in compare.QUANTITIES:
            for name, x in rec.quantity(q).items():
                d = float((x - golden.quantity(q)[name]).abs().max()) if x.numel() else 0.0
                drift[(q, name)] = max(drift.get((q, name), 0.0), d)
    return drift


def _stored(measured: Optional[dict]) -> tuple:
    """(stages_json, ledger_json) of a measured check (forward_modules left out: they are
    the recompute check's input, and a 24-block model's module names are long)."""
    if not measured:
        return None, None
    if "error" in measured:
        return json.dumps({"error": measured["error"]}), None
    st = {k: v for k, v in measured["stages"].items() if k not in ("forward_modules",
                                                                   "last_step")}
    return json.dumps(st), json.dumps(measured["ledger"])


def row(s: Scenario, cs: ChoiceSet, name: str, outcome: Outcome, run: Optional[RunInfo],
        duration: float, measured: Optional[dict] = None) -> ResultRow:
    check = CHECKS[name]
    params = dict(s.params, model=s.model, checkpoint=list(s.checkpoint),
                  impl={op: c.name for op, c in cs.choices.items()})
    r = ResultRow.start(run, op=STEP_KIND, case_id=f"{s.id}/{name}", case_group=s.name,
                        case_file=s.file, tags=sorted(s.tags),
                        params_json=json.dumps(params, sort_keys=True), seed=s.seed,
                        impl=cs.label, impl_kind=cs.kind, impl_origin=cs.origin,
                        impl_version=cs.version,
                        known_failure=check.expected_failure or None)
    r.outputs = [j.as_row() for j in outcome.judged]
    r.stages_json, r.ledger_json = _stored(measured)
    for k, v in measure.summary(measured).items():
        setattr(r, k, v)
    if r.time_median_s is not None:
        r.timing_method = measured["stages"]["timing"]
    if outcome.error is not None:
        verdict, kind, why = outcome.error
        return r.finish(verdict, why, kind, duration)
    failed = [j for j in outcome.judged if j.failure]
    if failed:
        return r.finish(Verdict.FAIL, failed[0].message, failed[0].failure, duration)
    again = (measured or {}).get("stages", {}).get("recompute")
    if again and not again["exact"]:
        return r.finish(Verdict.FAIL, f"the checkpointed backward counts "
                        f"{again['backward_flops']:,} FLOPs, not the plain backward's plus "
                        f"the recomputed forward's {again['expected_backward_flops']:,} "
                        f"(recomputed {again['recomputed_flops']:,})",
                        FailureKind.MISMATCH, duration)
    if not outcome.judged:
        return r.finish(Verdict.ERROR, "nothing was compared", FailureKind.HARNESS, duration)
    return r.finish(Verdict.PASS, outcome.note, None, duration)


def run_scenario(s: Scenario, cs: ChoiceSet, device, run: Optional[RunInfo] = None,
                 timed_steps: int = 0) -> list[ResultRow]:
    """The rows of every check of `s` under `cs`, in the scenario's check order; with
    `timed_steps`, the plain, checkpointed and offloaded steps measured (suite/step/
    measure.py) on the float64, checkpoint and offload rows."""
    started = time.monotonic()
    init = s.spec.init(s.params, s.seed)
    outcomes = check_steps(s, cs, device, init)
    measured = measure.measure_scenario(s, cs.backends_for, device, timed_steps, init) \
        if timed_steps else {}
    took = time.monotonic() - started
    return [row(s, cs, name, outcomes[name], run, took, measured.get(name))
            for name in s.checks]
