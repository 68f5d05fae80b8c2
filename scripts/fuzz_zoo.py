"""Fuzz every mutant of the zoo and compare with the zoo's own cases (docs/fuzz.md).

    python scripts/fuzz_zoo.py [--op OP] [--mutant NAME ...] [--budget 200] [--seed 0]
                               [--size small] [--shrink-tries 200] [--no-ci]

For each implementation of kind "mutant" in the registry (taken at run time, so new
mutants are included), on the CPU, in this process: cases are drawn as `python -m bwd_suite
fuzz --seed S --size small` draws them and run one at a time until the first failure
(found after: the number of drawn cases up to and including it, and the seconds since
this mutant's start); that failure is shrunk as the fuzz command shrinks it. The
smallest catching case of the ci profile is the smallest, by input elements, of the
ci cases the mutant fails (one call per item, as `python -m bwd_suite mutants` runs them;
the cases are run from the smallest up until one fails).
Prints a markdown table; exits 1 when a mutant was not found within the budget or its
shrunk case is larger than the smallest ci case that catches it.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _mutants(op, names):
    from bwd_suite.suite.commands.mutants import select_mutants

    return select_mutants(names or None, op)


def fuzz_one(spec, impl, seed: int, size, budget: int, shrink_tries: int, opts) -> dict:
    """Found after (cases, seconds) and the shrunk case of one mutant."""
    from bwd_suite.suite.driver import Driver
    from bwd_suite.suite.fuzz.draw import draw_cases, fuzz_case, refusal
    from bwd_suite.suite.fuzz.shrink import failure_of, input_numel, shrink
    from bwd_suite.suite.plan import Plan

    driver = Driver(opts)
    started = time.monotonic()

    def run(params):
        return driver.rows(Plan.single(spec, fuzz_case(spec, params), impl))[0]

    n, found = 0, None
    for case in draw_cases(spec, impl, "cpu", seed, size, max_attempts=10_000):
        if n >= budget:
            break
        n += 1
        row = driver.rows(Plan.single(spec, case, impl))[0]
        if failure_of(row) is not None and not row.expected:
            found = (case, row)
            break
    out = {"cases": n, "found": found is not None,
           "seconds": time.monotonic() - started}
    if found is None:
        return out
    case, row = found
    shrunk = shrink(spec, dict(case.params), row, run,
                    lambda p: refusal(spec, impl, p, "cpu") is None, shrink_tries)
    out.update(first=case.id, first_numel=input_numel(spec, case.params),
               shrunk=fuzz_case(spec, shrunk.params).id,
               shrunk_numel=input_numel(spec, shrunk.params), failure=str(shrunk.failure),
               tries=shrunk.tries, total_seconds=time.monotonic() - started)
    return out


def ci_smallest(m, opts) -> Optional[tuple]:
    """(input elements, case id) of the smallest ci case that mutant `m` fails (one call
    per item, as `python -m bwd_suite mutants` runs it), or None: the ci cases are run from
    the smallest up, so the first failing one is the answer."""
    import dataclasses

    from bwd_suite.suite import registry
    from bwd_suite.suite.cases import load_cases
    from bwd_suite.suite.driver import Driver
    from bwd_suite.suite.fuzz.shrink import input_numel
    from bwd_suite.suite.outcomes import Verdict
    from bwd_suite.suite.plan import Plan

    spec = registry.op(m.op)
    driver = Driver(dataclasses.replace(opts, repeats=1))
    sized = sorted(((input_numel(spec, c.params), c.id, c)
                    for c in load_cases(op=m.op, profile="ci")), key=lambda t: t[:2])
    for n, cid, case in sized:
        if m.unsupported_reason(case.params, "cpu"):
            continue
        if driver.rows(Plan.single(spec, case, m))[0].verdict is Verdict.FAIL:
            return n, cid
    return None


def main(argv=None) -> int:
    import torch

    from bwd_suite.suite import registry
    from bwd_suite.suite.fuzz.sizes import SIZES
    from bwd_suite.suite.runner import RunOptions

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--op")
    ap.add_argument("--mutant", action="append")
    ap.add_argument("--budget", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--size", choices=tuple(SIZES), default="small")
    ap.add_argument("--shrink-tries", type=int, default=200)
    ap.add_argument("--no-ci", action="store_true", help="skip the ci comparison")
    args = ap.parse_args(argv)

    cpu = torch.device("cpu")
    # as `python -m bwd_suite fuzz` (--repeats 2: a nondeterministic mutant is found too)
    opts = RunOptions(device=cpu, golden_device=cpu, repeats=2, timing=False)
    mutants = _mutants(args.op, args.mutant)
    lines = ["| mutant | first failure (cases, s) | shrunk to (input elements) | "
             "smallest catching ci case (input elements) | ok |", "|---|---|---|---|---|"]
    bad = 0
    for m in mutants:
        r = fuzz_one(registry.op(m.op), m, args.seed, SIZES[args.size], args.budget,
                     args.shrink_tries, opts)
        c = None if args.no_ci else ci_smallest(m, opts)
        if r["found"]:
            ok = c is None or r["shrunk_numel"] <= c[0]
            cells = (f"{r['cases']}, {r['seconds']:.1f} s",
                     f"{r['shrunk_numel']} (`{r['shrunk'].split('/', 2)[2]}`)")
        else:
            ok = False
            cells = (f"not found in {r['cases']}", "-")
        bad += not ok
        ci_cell = f"{c[0]} (`{c[1].split('/', 1)[1]}`)" if c else (
            "-" if args.no_ci else "not caught")
        lines.append(f"| `{m.name}` | {cells[0]} | {cells[1]} | {ci_cell} | "
                     f"{'yes' if ok else 'NO'} |")
        print(lines[-1], file=sys.stderr, flush=True)
    print("\n".join(lines))
    print(f"\n{len(mutants) - bad} of {len(mutants)} mutants found within {args.budget} "
          f"cases (seed {args.seed}, size {args.size}) and shrunk to no more input "
          f"elements than the zoo's smallest catching ci case")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
