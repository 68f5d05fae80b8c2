"""Run every port of tests/data/ports/manifest.toml on its op's ci profile (issue 41 item 3).

    python scripts/ports_ci.py [--op OP] [--port NAME ...] [--failing] [--check]
    python scripts/ports_ci.py --smallest [--op OP] [--port NAME ...]

Each port runs through the command a user runs, `python -m bwd_suite run --profile ci
--impl OP=module:object --device cpu --no-timing`, one run a port; "caught" is the items
that failed or raised of those run (unsupported items are not run). Prints a markdown
table; --failing also lists each port's failing case ids (to check its manifest
condition); --check exits 1 when a count differs from the manifest's `ci` field.

--smallest prints instead, per port, the smallest ci case that catches it (by input
elements; the ci cases run from the smallest up in this process until one fails): the
selection tests/data/ports/catching.toml holds for tests/harness/test_ports_caught.py.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.data.ports.manifest import impl_text, ports as manifest_ports  # noqa: E402


def run_ci(port: dict, out_dir: Path) -> tuple[int, int, list[str]]:
    """(items failed or raised, items run, failing case ids) of one port's ci run."""
    import pandas as pd

    before = set(out_dir.glob("*.parquet"))
    cmd = [sys.executable, "-m", "bwd_suite", "run", "--profile", "ci",
           "--impl", impl_text(port), "--device", "cpu", "--no-timing",
           "--quiet", "--out", str(out_dir)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{port['name']}: {' '.join(cmd)} exited {proc.returncode}: "
                         f"{proc.stderr.strip().splitlines()[-1:]}")
    (new,) = set(out_dir.glob("*.parquet")) - before
    rows = pd.read_parquet(new, columns=["case_id", "verdict"])
    ran = rows[rows.verdict != "unsupported"]
    bad = ran[ran.verdict.isin(["fail", "error", "timeout"])]
    return len(bad), len(ran), sorted(bad.case_id)


def smallest_catching(port: dict) -> str:
    """Id of the smallest ci case the port fails (one run a case, as `run` checks it)."""
    import torch

    from bwd_suite.suite import registry
    from bwd_suite.suite.cases import load_cases
    from bwd_suite.suite.driver import Driver
    from bwd_suite.suite.fuzz.shrink import input_numel
    from bwd_suite.suite.outcomes import Verdict
    from bwd_suite.suite.plan import Plan
    from bwd_suite.suite.runner import RunOptions
    from tests.data.ports.manifest import implementation

    cpu = torch.device("cpu")
    spec = registry.op(port["op"])
    impl = implementation(port)
    driver = Driver(RunOptions(device=cpu, golden_device=cpu, timing=False))
    for _, cid, case in sorted((input_numel(spec, c.params), c.id, c)
                               for c in load_cases(op=port["op"], profile="ci")):
        if driver.rows(Plan.single(spec, case, impl))[0].verdict in (Verdict.FAIL,
                                                                     Verdict.ERROR):
            return cid
    raise SystemExit(f"{port['name']}: no ci case catches it")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--op")
    ap.add_argument("--port", action="append", help="a port's name (repeatable)")
    ap.add_argument("--failing", action="store_true", help="list the failing case ids")
    ap.add_argument("--check", action="store_true",
                    help="exit 1 when a count differs from the manifest's ci field")
    ap.add_argument("--smallest", action="store_true",
                    help="print each port's smallest catching ci case (catching.toml)")
    ap.add_argument("--manifest", type=Path, default=None,
                    help="another manifest of the same form (the held-out ports)")
    args = ap.parse_args(argv)
    ports = manifest_ports(args.op, args.port, **({"path": args.manifest} if args.manifest
                                                  else {}))
    if args.smallest:
        import torch

        torch.set_num_threads(1)
        for p in ports:
            print(f"{p['name']} = {smallest_catching(p)!r}", flush=True)
        return 0
    print("| op | port | ci caught (failed / run) | manifest |\n|---|---|---|---|")
    differ = 0
    with tempfile.TemporaryDirectory() as tmp:
        for p in ports:
            failed, ran, ids = run_ci(p, Path(tmp))
            got = f"{failed}/{ran}"
            differ += got != p.get("ci")
            print(f"| {p['op']} | `{p['name']}` | {got} | {p.get('ci', '-')} |", flush=True)
            if args.failing:
                for cid in ids:
                    print(f"    {cid}")
    return 1 if args.check and differ else 0


if __name__ == "__main__":
    sys.exit(main())
