"""How often the diagnosis names the cause of the frozen ports right (issue 41 item 4).

    python scripts/ports_diagnosis.py [--op OP] [--port NAME ...] [--guards]

Every port of tests/data/ports/manifest.toml (ordinary implementations with one bug each,
written from the docs alone, branch `ports`) runs on its op's ci cases on the CPU, one
call per item, no timing, as the mutant zoo does; its run-level diagnosis
(suite.diagnosis.diagnose_run over all its items) is named right when its cause is one of
those tests/harness/port_causes.toml accepts for that port (written before any port ran
through the diagnosis; "with added": also those causes the file lists as created after
the first measurement). Prints a markdown table per op and the share named right per op,
both ways (the zoo not counted). --guards prints, per port named right, up to two failing
cases whose own item names an accepted cause: the regression guard's data
(tests/harness/port_guards.toml, read by tests/harness/test_port_diagnosis.py).
"""

from __future__ import annotations

import argparse
import sys
import time
import tomllib
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.data.ports.manifest import MANIFEST, ports as manifest_ports  # noqa: E402

CAUSES = ROOT / "tests" / "harness" / "port_causes.toml"
MAX_GUARDS = 2


def load(path: Path):
    with open(path, "rb") as f:
        return tomllib.load(f)


def run_port(port: dict, cases: list, driver) -> list:
    from bwd_suite.suite import registry
    from bwd_suite.suite.driver import Rows
    from bwd_suite.suite.plan import Plan

    impl = registry.external_implementation(f"{port['op']}={port['object']}")
    rows = Rows()
    driver.run(Plan.of(cases, lambda op: [impl]), rows)
    return list(rows)


def main(argv=None) -> int:
    import torch

    from bwd_suite.suite.cases import load_cases
    from bwd_suite.suite.diagnosis import diagnose_run
    from bwd_suite.suite.driver import Driver
    from bwd_suite.suite.outcomes import Verdict
    from bwd_suite.suite.runner import RunOptions
    from bwd_suite.suite.text import markdown_cell

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--op")
    ap.add_argument("--port", action="append", help="a port's name (repeatable)")
    ap.add_argument("--guards", action="store_true",
                    help="print the regression guard's cases (TOML)")
    ap.add_argument("--manifest", type=Path, default=MANIFEST,
                    help="the ports (default: the frozen ports' manifest.toml)")
    ap.add_argument("--causes", type=Path, default=CAUSES,
                    help="the causes accepted per port (default: port_causes.toml)")
    args = ap.parse_args(argv)
    accepted = load(args.causes)
    ports = manifest_ports(args.op, args.port, args.manifest)
    torch.set_num_threads(1)  # as `run` on a CPU: tiny tensors, a busy machine
    cpu = torch.device("cpu")
    driver = Driver(RunOptions(device=cpu, golden_device=cpu, repeats=1, timing=False))
    started = time.monotonic()
    share, guards = defaultdict(lambda: [0, 0, 0]), {}
    cases_of = {}
    for op in dict.fromkeys(p["op"] for p in ports):
        cases_of[op] = load_cases(op=op, profile="ci")
        print(f"\n#### {op}\n\n| port | caught | diagnosis | named right | with added |\n"
              f"|---|---|---|---|---|")
        for p in (p for p in ports if p["op"] == op):
            rows = run_port(p, cases_of[op], driver)
            ran = [r for r in rows if r.verdict is not Verdict.UNSUPPORTED]
            bad = [r for r in ran if r.verdict.bad]
            found = [d for d in diagnose_run(rows)]
            d = found[0] if found else None
            want = accepted[p["name"]]
            every = set(want["named"]) | set(want.get("added", ()))
            ok = d is not None and d.cause in want["named"]
            ok_added = d is not None and d.cause in every
            share[op][0] += ok
            share[op][1] += ok_added
            share[op][2] += 1
            title = (d.title or d.text.split(":")[0]) if d else "-"
            print(f"| `{p['name']}` | {len(bad)} of {len(ran)} | {markdown_cell(title)} | "
                  f"{'yes' if ok else 'no'} | {'yes' if ok_added else 'no'} |", flush=True)
            if ok_added:
                guards[p["name"]] = [r.case_id for r in bad
                                     if r.diagnosis_cause in every][:MAX_GUARDS]
    print()
    total = [sum(v[i] for v in share.values()) for i in (0, 1, 2)]
    for op, (n_ok, n_added, n) in [*share.items(), ("all ops", total)]:
        print(f"{op}: cause named right for {n_ok} of {n} ports ({n_ok / n:.0%}); with the "
              f"causes added since, {n_added} ({n_added / n:.0%})")
    print(f"{time.monotonic() - started:.0f} s")
    if args.guards:
        print()
        for name, ids in guards.items():
            print(f'{name} = {ids!r}'.replace("'", '"'))
    return 0


if __name__ == "__main__":
    sys.exit(main())
