"""The linear backward's two GEMMs alone, beside the suite's times of each implementation:
are our fused epilogues free, and what do they gain over the unfused PyTorch ops?

For every linear case of a `run` (RESULTS.parquet, timed, on this machine), the two plain
GEMMs of its backward with the case's shapes, dtype and storage: dx = dY w and
dw = dYᵀ x (torch.matmul into preallocated outputs, no epilogue, no derivative, no bias
sum), timed twice: by the suite's own timer (suite.timing.time_call: L2 flushed, as the
run timed the implementations) and by a bare loop of CUDA events. Printed per case:
the bare GEMMs' time, each implementation's median, ours over the bare GEMMs (target
<= 1.03 where an epilogue carries the derivative and db), and torch_unfused over ours
(target >= 1.15 with gelu and bias).

    python3 scripts/linear_bare_gemms.py RESULTS.parquet [--reps 30]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from bwd_suite.suite import registry, results  # noqa: E402
from bwd_suite.suite.errors import SuiteInputError, run_script  # noqa: E402
from bwd_suite.suite.timing import time_call  # noqa: E402

# the same bare CUDA-event loop as attention's (python puts scripts/ on sys.path)
from attention_bare_loop import bare_ms as events_ms  # noqa: E402

OURS, UNFUSED, REF = "cublaslt", "torch_unfused", "torch_ref"


def bare_gemms(params: dict, seed: int, dev: torch.device):
    """The closure of the case's two GEMMs into preallocated outputs (its own inputs)."""
    spec = registry.op("linear")
    t = spec.make_inputs(params, seed, dev).tensors
    x, w, dy = t["x"], t["w"], t["dy"]
    dx, dw = torch.empty_like(x), torch.empty_like(w)

    def run():
        torch.matmul(dy, w, out=dx)
        torch.matmul(dy.t(), x, out=dw)
    return run


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path)
    ap.add_argument("--reps", type=int, default=30)
    a = ap.parse_args(argv)
    if not torch.cuda.is_available():
        raise SuiteInputError("device", "timing GEMMs needs a CUDA device")
    df = results.read_results([a.results])
    df = df[(df.op == "linear") & df.time_median_s.notna()]
    spec = registry.op("linear")
    dev = torch.device("cuda")
    print(f"{'case':52s} {'bare ms':>8s} {'events':>7s} {'ours':>7s} {'unfused':>7s} "
          f"{'ref':>7s} {'ours/bare':>9s} {'unf/ours':>8s} {'ours TF/s':>9s}")
    fused, speedups = [], []
    for case_id, rows in df.groupby("case_id", sort=False):
        first = rows.iloc[0]
        params = dict(spec.params.defaults(), **json.loads(first.params_json))
        fn = bare_gemms(params, int(first.seed), dev)
        suite_ms = 1e3 * time_call(fn, dev, repeats=a.reps).median_s
        ev_ms, _ = events_ms(fn, a.reps, held=False)  # paced, as its numbers so far
        ms = {r.impl: 1e3 * r.time_median_s for r in rows.itertuples()}
        ours, unf = ms.get(OURS), ms.get(UNFUSED)
        ratio = ours / suite_ms if ours else float("nan")
        gain = unf / ours if ours and unf else float("nan")
        tflops = rows[rows.impl == OURS].tflops
        if ours and params["act_at"] == "input" and params["activation"] != "none":
            fused.append((case_id, ratio))
        if ours and unf and params["activation"] == "gelu" and params["bias"]:
            speedups.append((case_id, gain))
        fmt = lambda v: f"{v:7.3f}" if v else "      -"  # noqa: E731
        print(f"{case_id[-52:]:52s} {suite_ms:8.3f} {ev_ms:7.3f} {fmt(ours)} {fmt(unf)} "
              f"{fmt(ms.get(REF))} {ratio:9.3f} {gain:8.3f} "
              f"{float(tflops.iloc[0]) if len(tflops) else float('nan'):9.1f}", flush=True)
        del fn
        torch.cuda.empty_cache()
    if fused:
        worst = max(fused, key=lambda c: c[1])
        print(f"ours with the derivative and db in epilogues over the bare GEMMs: median "
              f"{statistics.median(r for _, r in fused):.3f}, worst {worst[1]:.3f} "
              f"({worst[0]}); target <= 1.03")
    if speedups:
        worst = min(speedups, key=lambda c: c[1])
        print(f"torch_unfused over ours, gelu and bias: median "
              f"{statistics.median(g for _, g in speedups):.3f}, worst {worst[1]:.3f} "
              f"({worst[0]}); target >= 1.15")
    return 0


if __name__ == "__main__":
    run_script(main, "linear_bare_gemms")
