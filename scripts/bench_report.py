"""Time the HTML report on a large run: N rows built from the stored H200 foundation runs
(tests/data), as many implementations x distinct cases, every ninth a failure, against a
baseline 1.3x faster (so the regressions section is full). Prints the seconds and the
page's size; exits 1 when the render took longer than --max-seconds.

    python3 scripts/bench_report.py --rows 20000 --max-seconds 10
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bwd_suite.suite.errors import SuiteInputError, run_script  # noqa: E402

DATA = ROOT / "tests" / "data"


def large_run(rows: int):
    """(current, baseline) frames of `rows` rows each."""
    import pandas as pd

    from bwd_suite.suite.results import read_results

    src = read_results([DATA / "h200-foundation-perf.parquet",
                        DATA / "h200-foundation-gpu.parquet"])
    parts, k = [], 0
    while sum(map(len, parts)) < rows:
        parts.append(src.assign(case_id=src.case_id + f"-r{k // 4}",
                                impl=src.impl + f"_{k % 4}"))
        k += 1
    base = pd.concat(parts, ignore_index=True).iloc[:rows].copy()
    failing = base.index % 9 == 0
    base.loc[failing, ["verdict", "failure_kind", "reason"]] = ["fail", "mismatch", "planted"]
    current = base.copy()
    current["time_median_s"] = current["time_median_s"] * 1.3
    current["time_samples_s"] = [s * 1.3 for s in current["time_samples_s"]]
    return current, base


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=20_000, help="rows per run (default 20000)")
    ap.add_argument("--max-seconds", type=float, default=10.0,
                    help="the target: render and write within this (default 10)")
    a = ap.parse_args(argv)
    if a.rows < 1:
        raise SuiteInputError("--rows", f"must be at least 1, got {a.rows}")
    from bwd_suite.reports import render

    current, baseline = large_run(a.rows)
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        path = render.write(render.build(current, baseline), Path(tmp) / "big.html")
        seconds = time.perf_counter() - start
        size = path.stat().st_size
    met = seconds <= a.max_seconds
    print(f"report of {a.rows} rows against a baseline of {a.rows}: {seconds:.1f} s, "
          f"{size / 1e6:.1f} MB ({'within' if met else 'over'} the {a.max_seconds:g} s target)")
    return 0 if met else 1


if __name__ == "__main__":
    run_script(main, "bench_report")
