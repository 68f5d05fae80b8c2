"""Launch one implementation's backward on one case a few times, for a profiler to pick a
launch (Nsight Compute on the GPU machine):

    ncu --clock-control none -k regex:piped --launch-skip 2 --launch-count 1 \\
        python3 scripts/ncu_case.py --op layer_norm --impl cuda --case M16384-N4096-bf16

--case takes any part of a case id (the first match in cases/ wins, one that ends with it
first; `python -m bwd_suite list --op OP --ids` shows ids); the inputs are the case's own
(seeded, its dtype and layout), the outputs allocated once outside the launches, as the
suite times them. No golden is computed and nothing is checked: correctness is the suite's job.

--timeline (CUDA) times the call as the suite does (suite.timing.time_call: L2 flush, one
spin holding the GPU while the samples are enqueued, CUDA events around the call; the
samples are the last MARK ranges, after the warm-up's) under torch.profiler and prints
where the events' time goes: each kernel of the call, the gaps between them, and the time
inside the events that no kernel of the call runs in (medians over the samples): the
tool that showed the gap between LayerNorm's two kernels that a programmatic dependent
launch then closed (docs/benchmark-history.md):

    python3 scripts/ncu_case.py --op layer_norm --impl cuda --case M4096-N8192-bf16 --timeline
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from bwd_suite.suite import registry  # noqa: E402
from bwd_suite.suite.cases import load_cases  # noqa: E402
from bwd_suite.suite.errors import SuiteInputError, run_script  # noqa: E402
from bwd_suite.suite.calls import timed_call  # noqa: E402
from bwd_suite.suite.timing import time_call  # noqa: E402

MARK = "ncu_case:call"  # the profiler range around each call (--timeline)
GPU_WORK = ("kernel", "gpu_memset", "gpu_memcpy")  # trace categories of device work
HOST_API = ("cuda_runtime", "cuda_driver")  # ... and of the calls that launch it


def _short(name: str) -> str:
    """A kernel's name without its template arguments, parameters and namespaces."""
    head = name.replace("(anonymous namespace)::", "").split("<")[0].split("(")[0].strip()
    return head.split("::")[-1].split(" ")[-1]


def summarize(trace: list[dict], samples: int) -> list[list[tuple[str, float, float]]]:
    """The device work (kernels, memsets, copies) launched inside each of the last `samples`
    MARK ranges of a Chrome trace (torch.profiler's export): per range, (short name, start
    us, duration us) in start order. Work belongs to a range when the runtime or driver call
    that launched it (matched by correlation id) lies inside the range on the host
    timeline."""
    ranges = sorted((e["ts"], e["ts"] + e["dur"]) for e in trace
                    if e.get("name") == MARK and e.get("ph") == "X"
                    and e.get("cat") == "user_annotation")[-samples:]
    kernels = {e["args"]["correlation"]: e for e in trace
               if e.get("cat") in GPU_WORK and "correlation" in e.get("args", {})}
    per = [[] for _ in ranges]
    for e in trace:
        if e.get("cat") not in HOST_API:
            continue
        k = kernels.get(e.get("args", {}).get("correlation"))
        for i, (lo, hi) in enumerate(ranges):
            if k is not None and lo <= e["ts"] <= hi:
                per[i].append((_short(k["name"]), float(k["ts"]), float(k["dur"])))
    return [sorted(p, key=lambda k: k[1]) for p in per]


def timeline_lines(per: list[list[tuple[str, float, float]]], events_us: list[float]) -> list[str]:
    """Medians over the samples: the events' time, each kernel, each gap between two kernels,
    the kernels' span, and the events' time outside it."""
    med = statistics.median
    if not per or not per[0] or any(len(p) != len(per[0]) for p in per):
        return [f"kernels per sample differ or are missing: {[len(p) for p in per]}"]
    lines = [f"events {med(events_us):.1f} us over {len(per)} samples"]
    for j, (name, _, _) in enumerate(per[0]):
        if j:
            gap = med(p[j][1] - (p[j - 1][1] + p[j - 1][2]) for p in per)
            lines.append(f"  gap {gap:.1f} us")
        lines.append(f"  {name} {med(p[j][2] for p in per):.1f} us")
    span = [p[-1][1] + p[-1][2] - p[0][1] for p in per]
    lines.append(f"kernels' span {med(span):.1f} us; outside it, inside the events: "
                 f"{med(e - s for e, s in zip(events_us, span)):.1f} us")
    return lines


def timeline(call, device: torch.device, samples: int) -> list[str]:
    from torch.profiler import ProfilerActivity, profile, record_function

    def marked():
        with record_function(MARK):
            call()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        timing = time_call(marked, device, repeats=samples, max_time_s=10.0)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        trace = json.loads(path.read_text())["traceEvents"]
    per = summarize(trace, len(timing.samples_s))
    return timeline_lines(per, [t * 1e6 for t in timing.samples_s])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--op", required=True, help="op name, e.g. layer_norm")
    ap.add_argument("--impl", required=True, help="implementation name, e.g. cuda")
    ap.add_argument("--case", required=True, help="part of a case id (first match wins)")
    ap.add_argument("--launches", type=int, default=4, help="backward calls (default 4)")
    ap.add_argument("--device", default="cuda", help="torch device (default cuda)")
    ap.add_argument("--timeline", action="store_true",
                    help="time the call as the suite does, under torch.profiler, and print "
                         "its kernels, the gaps between them and the time outside them (CUDA)")
    ap.add_argument("--samples", type=int, default=10, help="timed calls with --timeline")
    a = ap.parse_args(argv)
    spec = registry.op(a.op, where="--op")
    cases = [c for c in load_cases(op=a.op) if a.case in c.id]
    # an id that is also the prefix of another ("...-tanh" and "...-tanh-actin") is its own
    cases = [c for c in cases if c.id.endswith(a.case)] or cases
    if not cases:
        raise SuiteInputError("--case", f"no {a.op} case id contains {a.case!r}")
    impls = {i.name: i for i in registry.implementations(a.op)}
    if a.impl not in impls:
        raise SuiteInputError("--impl", f"{a.impl!r} is not one of {sorted(impls)}")
    impl, case, device = impls[a.impl], cases[0], torch.device(a.device)
    why = impl.unsupported_reason(case.params, device.type)
    if why:
        raise SuiteInputError("--impl", f"{a.impl} does not run {case.id}: {why}")
    if a.timeline and device.type != "cuda":
        raise SuiteInputError("--timeline", f"times CUDA kernels; --device is {a.device}")
    inputs = spec.make_inputs(case.params, case.seed, device)
    call = timed_call(spec, impl, inputs, case.params)
    if a.timeline:
        print(f"{a.op}/{a.impl} on {case.id}:")
        print("\n".join(timeline(call, device, a.samples)))
        return 0
    for _ in range(a.launches):
        call()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    print(f"{a.launches} launches of {a.op}/{a.impl} on {case.id}")
    return 0


if __name__ == "__main__":
    run_script(main, "ncu_case")
