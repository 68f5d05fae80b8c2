"""The measuring pass of a scenario under one choice of backwards: for the plain step and the
checkpointed and offloaded ones (the checks float64, checkpoint and offload), a fresh run
alone in the process, its stages timed, counted and profiled (suite/step/stages.py) and
one step's memory ledger (suite/step/ledger.py). Separate from the checks' runs, which
step in lockstep with the float64 model and would share the device with it.

With checkpointing the backward recomputes the checkpointed layers' forward: its FLOPs must
be the plain backward's plus exactly those layers' forward FLOPs (`recompute`), or the row
of the checkpoint check fails.
"""

from __future__ import annotations

import gc
import statistics
import traceback
from typing import Optional

import torch

from bwd_suite.suite.inputs import DTYPES
from bwd_suite.suite.step import ledger, stages
from bwd_suite.suite.step.checks import CHECKS
from bwd_suite.suite.step.loop import PLAIN, Run
from bwd_suite.suite.step.scenario import Scenario

MEASURED = ("float64", "checkpoint", "offload")  # the rows that carry a stage profile


def _free(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def _one(s: Scenario, backends_for, device, check: str, timed_steps: int, init: dict) -> dict:
    spec = s.spec
    variant = CHECKS[check].variant(s.params, s.checkpoint) or PLAIN
    batch = spec.training.batch(s.params, s.seed, device)
    run = Run(spec, s.params, backends_for(device), DTYPES[s.params["dtype"]], device, init,
              batch, variant, s.seed)
    took = stages.measure(run.step, device, timed_steps)
    mem = ledger.measure(run, took["last_step"] + 1, device)
    del run
    _free(device)
    return {"stages": took, "ledger": mem}


def recompute(plain: dict, checkpointed: dict, s: Scenario) -> dict:
    """The checkpointed backward's FLOPs against the plain backward's plus the forward
    FLOPs of the checkpointed layers (exact integers: FlopCounterMode's counts)."""
    again = stages.recomputed(plain["forward_modules"], s.spec.layer_modules, s.checkpoint)
    expected = plain["stages"]["backward"]["flops"] + again
    got = checkpointed["stages"]["backward"]["flops"]
    return {"recomputed_flops": again, "expected_backward_flops": expected,
            "backward_flops": got, "exact": got == expected}


def measure_scenario(s: Scenario, backends_for, device, timed_steps: int = 3,
                     init: Optional[dict] = None) -> dict:
    """{check: {"stages": ..., "ledger": ...} or {"error": text}} for the measured checks of
    `s`; the checkpoint entry's stages also carry `recompute`. `init`: the scenario's initial
    parameters when drawn already."""
    device = torch.device(device)
    init = s.spec.init(s.params, s.seed) if init is None else init
    _free(device)
    out: dict = {}
    for check in (c for c in MEASURED if c in s.checks):
        try:
            out[check] = _one(s, backends_for, device, check, timed_steps, init)
        except Exception as e:  # noqa: BLE001 - a measurement that fails is noted, not fatal
            tail = "".join(traceback.format_exception(type(e), e, e.__traceback__)[-2:])
            out[check] = {"error": f"{type(e).__name__}: {e} | {tail[-800:]}"}
            _free(device)
    plain, ckpt = out.get("float64"), out.get("checkpoint")
    if plain and ckpt and "error" not in plain and "error" not in ckpt:
        ckpt["stages"]["recompute"] = recompute(plain["stages"], ckpt["stages"], s)
    return out


def summary(measured: Optional[dict]) -> dict:
    """The standard columns a measured row fills: the timed steps' seconds (samples, median,
    IQR), the step's FLOPs, launches and memory peak (the allocator's on CUDA), its saved
    activations."""
    if not measured or "error" in measured:
        return {}
    st, mem = measured["stages"]["stages"], measured["ledger"]
    samples = measured["stages"].get("step_samples_s") or []
    launches = [v["launches"] for v in st.values() if v["launches"] is not None]
    cols = {"flops": sum(v["flops"] for v in st.values()),
            "launches": sum(launches) if launches else None}
    if samples:  # the whole step's samples: `compare` tests them as the ops' samples
        q = statistics.quantiles(samples, n=4) if len(samples) > 1 else [samples[0]] * 3
        cols.update(time_samples_s=list(samples), time_median_s=statistics.median(samples),
                    time_iqr_s=q[2] - q[0], wall_median_ms=statistics.median(samples) * 1e3)
    if "error" not in mem:
        cols["peak_mem_bytes"] = mem.get("allocator_peak")
        cols["saved_bytes"] = mem.get("saved_after_forward")
    return cols
