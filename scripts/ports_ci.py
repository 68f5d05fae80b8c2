"""Run every port of tests/data/ports/manifest.toml on its op's ci profile (issue 41 item 3).

    python scripts/ports_ci.py [--op OP] [--port NAME ...] [--failing] [--check]

Each port runs through the command a user runs, `python -m bwd_suite run --profile ci
--impl OP=module:object --device cpu --no-timing`, one run a port; "caught" is the items
that failed or raised of those run (unsupported items are not run). Prints a markdown
table; --failing also lists each port's failing case ids (to check its manifest
condition); --check exits 1 when a count differs from the manifest's `ci` field.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = ROOT / "tests" / "data" / "ports" / "manifest.toml"


def load_manifest(path: Path = MANIFEST) -> list[dict]:
    with open(path, "rb") as f:
        return tomllib.load(f)["port"]


def run_ci(port: dict, out_dir: Path) -> tuple[int, int, list[str]]:
    """(items failed or raised, items run, failing case ids) of one port's ci run."""
    import pandas as pd

    before = set(out_dir.glob("*.parquet"))
    cmd = [sys.executable, "-m", "bwd_suite", "run", "--profile", "ci",
           "--impl", f"{port['op']}={port['object']}", "--device", "cpu", "--no-timing",
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--op")
    ap.add_argument("--port", action="append", help="a port's name (repeatable)")
    ap.add_argument("--failing", action="store_true", help="list the failing case ids")
    ap.add_argument("--check", action="store_true",
                    help="exit 1 when a count differs from the manifest's ci field")
    args = ap.parse_args(argv)
    ports = [p for p in load_manifest() if (not args.op or p["op"] == args.op)
             and (not args.port or p["name"] in args.port)]
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
