"""Does the suite time the attention kernels, or itself? For each case and implementation,
the suite's time of the backward (the median of a `run`'s results file) beside a bare loop
of CUDA events around the very same call (the implementation's backward on its prepared
state, no harness in between), and their ratio. Target: within 5%.

Two bare loops: `paced`, each call launched as the host gets to it (a backend whose host
work outlasts its kernels, such as cuDNN's at GPT-2 sizes, leaves the GPU idle between
launches, and those gaps fall between the events); and `held`, the same calls enqueued
behind one spin kernel (`torch.cuda._sleep`, nvbench's blocking kernel), so the GPU runs them
back to back and the events enclose the kernels alone, as the suite's own pacing does. The
target compares the suite with `held`; `paced` shows what launch gaps add; `flushed` is
`held` with a 256 MiB write before each call, outside the events (triton's do_bench clears
its cache so): it tells whether a gap between the suite and `held` comes from what runs
between the calls (a cold L2, or compute-bound calls that never pause throttling clocks).

    python3 scripts/attention_bare_loop.py RESULTS.parquet [--impl a,b] [--reps 50]

RESULTS is a `run` of the same cases on this machine (same seeds, so the same inputs).
Prints one line per item and writes nothing else.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from bwd_suite.suite import registry, results  # noqa: E402
from bwd_suite.suite.errors import SuiteInputError, run_script  # noqa: E402
from bwd_suite.suite.timing import spin_rate  # noqa: E402


def bare_ms(fn, reps: int, held: bool, warmup: int = 10,
            cache: torch.Tensor | None = None) -> tuple[float, bool]:
    """The median of `reps` CUDA-event intervals, one call each, no setup; held: all of them
    enqueued behind one spin twice as long as the host took to enqueue the warm-up's calls;
    cache: zeroed before each call, outside its events. Also whether the host outran the
    spin (then the hold hid nothing)."""
    began = time.perf_counter()
    for _ in range(warmup):
        fn()
    host_s = (time.perf_counter() - began) / warmup
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
          for _ in range(reps)]
    spun = None
    if held:
        rate = spin_rate()
        torch.cuda._sleep(int((2 * reps * host_s + 1e-3) * rate))
        spun = torch.cuda.Event()
        spun.record()
    for a, b in ev:
        if cache is not None:
            cache.zero_()
        a.record()
        fn()
        b.record()
    outrun = spun is not None and spun.query()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in ev), outrun


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path)
    ap.add_argument("--impl", default="", help="comma-separated; default every timed one")
    ap.add_argument("--reps", type=int, default=50)
    a = ap.parse_args(argv)
    if not torch.cuda.is_available():
        raise SuiteInputError("device", "a bare loop of CUDA events needs a CUDA device")
    df = results.read_results([a.results])  # a run cut short leaves its journal
    df = df[(df.op == "attention") & df.time_median_s.notna()]
    if a.impl:
        df = df[df.impl.isin(a.impl.split(","))]
    # compiled ones last: each shape compiles again in this process
    df = df.assign(_last=df.impl == "torch_flex").sort_values("_last", kind="stable")
    spec = registry.op("attention")
    impls = {i.name: i for i in registry.implementations("attention")}
    dev = torch.device("cuda")
    cache = torch.empty(256 * 2**20, dtype=torch.int8, device=dev)
    ratios, paced_ratios, flushed_ratios = [], [], []
    print(f"{'case':56s} {'impl':20s} {'suite ms':>9s} {'held ms':>9s} {'ratio':>6s} "
          f"{'paced ms':>9s} {'ratio':>6s} {'flushed ms':>10s} {'ratio':>6s}")
    for _, row in df.iterrows():
        impl = impls.get(row.impl)
        if impl is None or impl.prepare is None:
            continue
        params = dict(spec.params.defaults(), **json.loads(row.params_json))
        inputs = spec.make_inputs(params, int(row.seed), dev)
        saved = impl.prepare(**inputs.tensors, **inputs.attrs)
        call = lambda: impl.fn(**inputs.tensors, **inputs.attrs, saved=saved)  # noqa: E731
        held_ms, outrun = bare_ms(call, a.reps, held=True)
        paced_ms, _ = bare_ms(call, a.reps, held=False)
        flushed_ms, _ = bare_ms(call, a.reps, held=True, cache=cache)
        suite_ms = 1e3 * row.time_median_s
        ratios.append(suite_ms / held_ms)
        paced_ratios.append(suite_ms / paced_ms)
        flushed_ratios.append(suite_ms / flushed_ms)
        print(f"{row.case_id[-56:]:56s} {row.impl:20s} {suite_ms:9.3f} {held_ms:9.3f} "
              f"{suite_ms / held_ms:6.3f} {paced_ms:9.3f} {suite_ms / paced_ms:6.3f} "
              f"{flushed_ms:10.3f} {suite_ms / flushed_ms:6.3f}"
              + ("  (the host outran the hold)" if outrun else ""), flush=True)
        del saved, inputs
        torch.cuda.empty_cache()
    if ratios:
        worst = max(ratios, key=lambda r: abs(r - 1))
        print(f"{len(ratios)} items: suite / held median {statistics.median(ratios):.3f}, "
              f"worst {worst:.3f} (target within 5%), {sum(abs(r - 1) <= 0.05 for r in ratios)} "
              f"within 5%")
        for name, rs in (("paced", paced_ratios), ("flushed", flushed_ratios)):
            print(f"suite / {name} median {statistics.median(rs):.3f}, worst "
                  f"{max(rs, key=lambda r: abs(r - 1)):.3f}, "
                  f"{sum(abs(r - 1) <= 0.05 for r in rs)} within 5%")
    return 0


if __name__ == "__main__":
    run_script(main, "attention_bare_loop")
