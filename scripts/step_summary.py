"""Print the training-step scenarios of results files as the tables BENCHMARKS.md takes:
per scenario, choice of backwards and measured step (plain, checkpointed, offloaded) the
median time, FLOPs and kernel launches of each stage; then the memory ledger by state
class, measured against its model (x1: as modelled; docs/step.md#memory-ledger).

    python scripts/step_summary.py RESULTS... [--markdown]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's bwd_suite

from bwd_suite.suite.errors import run_script  # noqa: E402
from bwd_suite.suite.profiles import STEP_KIND  # noqa: E402
from bwd_suite.suite.results import read_results  # noqa: E402

STAGES = ("forward", "loss", "backward", "optimizer")
STEPS = {"float64": "plain", "checkpoint": "checkpointed", "offload": "offloaded"}
CLASSES = ("parameters", "gradients", "optimizer_state", "saved_activations", "temporaries",
           "workspace")


def _ms(v) -> str:
    return "-" if v is None else f"{v:.2f}"


def _mb(v) -> str:
    return "-" if v is None else f"{v / 2**20:,.1f}"


def lines(df, sep: str) -> list:
    out = []
    rows = df[(df.op == STEP_KIND) & df.stages_json.notna()]
    head = ["scenario", "impl", "step"] + [f"{s} ms" for s in STAGES] + \
        [f"{s} launches" for s in STAGES] + ["total ms", "bwd/fwd launches", "bwd GFLOP"]
    out.append(sep.join(head))
    for _, r in rows.iterrows():
        st = json.loads(r.stages_json)
        if "error" in st:
            step = STEPS.get(r.case_id.rsplit("/", 1)[-1], "?")
            out.append(sep.join([r.case_group, r.impl, step,
                                 f"not measured: {st['error'][:120]}"]))
            continue
        s = st["stages"]
        fl, bl = s["forward"]["launches"], s["backward"]["launches"]
        total = sum(s[k]["time_ms"] or 0 for k in STAGES)
        out.append(sep.join(
            [r.case_group, r.impl, STEPS[r.case_id.rsplit("/", 1)[-1]]]
            + [_ms(s[k]["time_ms"]) for k in STAGES]
            + [str(s[k]["launches"]) if s[k]["launches"] is not None else "-" for k in STAGES]
            + [_ms(total), f"{bl / fl:.2f}" if fl and bl else "-",
               f"{s['backward']['flops'] / 1e9:,.1f}"]))
        if "recompute" in st:
            a = st["recompute"]
            out.append(f"  recompute: {a['recomputed_flops'] / 1e9:,.1f} GFLOP, "
                       f"exact: {a['exact']}")
    out.append("")
    modelled = CLASSES[:4]  # temporaries and workspace have no model
    out.append(sep.join(["scenario", "impl", "step"]
                        + [f"{c} MiB" + (" (model, ratio)" if c in modelled else "")
                           for c in CLASSES]
                        + ["saved after fwd MiB", "allocator peak MiB", "peak in"]))
    for _, r in rows.iterrows():
        if not isinstance(r.ledger_json, str):
            continue
        led = json.loads(r.ledger_json)
        if "error" in led:
            continue
        m, a = led["measured"], led["analytic"]
        cells = []
        for c in CLASSES:
            got = led["saved_after_forward"] if c == "saved_activations" else m.get(c)
            model = a.get(c)
            ratio = f"{got / model:.3f}" if got is not None and model else "-"
            cells.append(f"{_mb(got)} ({_mb(model)}, {ratio})" if model is not None else _mb(got))
        out.append(sep.join([r.case_group, r.impl, STEPS[r.case_id.rsplit("/", 1)[-1]]] + cells
                            + [_mb(led["saved_after_forward"]), _mb(led.get("allocator_peak")),
                               led.get("peak_stage") or "-"]))
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("results", nargs="+")
    p.add_argument("--markdown", action="store_true", help="| separated rows")
    args = p.parse_args()
    df = read_results(args.results)
    sep = " | " if args.markdown else "  "
    print("\n".join(lines(df, sep)))
    bad = df[(df.op == STEP_KIND) & df.verdict.isin(["fail", "error"]) & df.known_failure.isna()]
    for _, r in bad.iterrows():
        print(f"FAILED {r.impl} {r.case_id}: {str(r.reason)[:300]}")
    return 0


if __name__ == "__main__":
    run_script(main, "step_summary")
