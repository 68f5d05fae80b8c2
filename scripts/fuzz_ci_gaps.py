"""Does the ci profile catch what the fuzzer catches? Every mutant of the zoo and every
port of tests/data/ports/manifest.toml, fuzzed and set against the ci cases (issue 41
item 4; docs/fuzz.md).

    python scripts/fuzz_ci_gaps.py [--op OP] [--target NAME ...] [--budget 300] [--time 240]
                                   [--seed 0] [--size small] [--shrink-tries 100]
                                   [--shrink-time 30] [--groups] [--no-mutants] [--no-ports]

Per op, on the CPU, in this process (one intra-op thread), every target of the op at
once, so that each case's golden and yardstick are computed once:

1. the ci cases run on every target (repeats 2, as fuzz); each target's failing items
   are grouped as the fuzz command groups them (verdict, failure kind and first failing
   output, or the exception: `suite.fuzz.shrink.failure_of`);
2. cases drawn as `python -m bwd_suite fuzz --op OP --seed S --size SIZE` draws them
   (for the op's yardstick, which runs every case), run on every target in rounds of
   ROUND cases until --budget cases or --time seconds of the op's drawn cases have run,
   grouped the same way;
3. a target the fuzzer catches and no ci item catches is a gap: its failure groups are
   shrunk as the fuzz command shrinks them, each from its smallest failing case, and
   printed as case-file blocks (to commit under cases/<op>/, tagged ci). With --groups,
   so is every group the fuzzer found that none of the target's ci items shows (a bug ci
   catches, showing another way). Shrinking starts from a failing case where the
   yardstick is not as wrong as the target (`yardstick_too`) where there is one.

Prints a markdown table, a row per target: ci items failed / run, drawn cases failed /
run, the failure groups the fuzzer found that ci does not show, and what was shrunk;
then the blocks. Exits 1 when a target the fuzzer catches is missed by ci.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROUND = 10  # drawn cases run on every target between looks at the clock
sys.path.insert(0, str(ROOT))


def targets(op: str, names, mutants: bool, ports: bool) -> list:
    """(implementation, label) of the op's mutants and ports."""
    from bwd_suite.suite.commands.mutants import select_mutants
    from tests.data.ports import manifest

    out = []
    if mutants:
        out += [(m, m.name) for m in select_mutants(None, op)]
    if ports:
        out += [(manifest.implementation(p), p["name"]) for p in manifest.ports(op)]
    return [t for t in out if not names or t[1] in names]


def failures(rows) -> dict:
    """{impl name: (items run, {failure core: [(failure, row)]})}; known failures and
    unsupported items are not counted."""
    from bwd_suite.suite.fuzz.shrink import failure_of
    from bwd_suite.suite.outcomes import Verdict

    out: dict = {}
    for r in rows:
        ran, groups = out.setdefault(r.impl, [0, {}])
        if r.verdict is Verdict.UNSUPPORTED or r.expected:
            continue
        out[r.impl][0] += 1
        f = failure_of(r)
        if f is not None:
            groups.setdefault(f.core, []).append((f, r))
    return out


def caught(entry) -> int:
    """Items the target failed (or raised): caught, whether or not the yardstick would
    be as wrong there (the bound is min(yardstick, fp32 with one rounding))."""
    return len({r.case_id for members in entry[1].values() for _, r in members})


def run_op(op: str, tgts: list, args, opts) -> tuple[list, list, int]:
    """(table lines, case blocks, targets caught by the fuzzer and missed by ci)."""
    from bwd_suite.suite import registry
    from bwd_suite.suite.cases import load_cases
    from bwd_suite.suite.driver import Driver
    from bwd_suite.suite.fuzz.draw import draw_cases, fuzz_case, refusal
    from bwd_suite.suite.fuzz.shrink import input_numel, shrink
    from bwd_suite.suite.fuzz.sizes import SIZES
    from bwd_suite.suite.fuzz.toml import case_block, case_name
    from bwd_suite.suite.plan import Plan

    spec = registry.op(op)
    impls = [t[0] for t in tgts]
    driver = Driver(opts)
    t0 = time.monotonic()
    ci = failures(driver.rows(Plan.of(load_cases(op=op, profile="ci"), lambda _: impls)))
    t_ci = time.monotonic() - t0
    drawer = registry.resolve(op, spec.yardstick)
    draws = draw_cases(spec, drawer, "cpu", args.seed, SIZES[args.size], max_attempts=10_000)
    cases, rows = [], []
    t0 = time.monotonic()
    while len(cases) < args.budget and time.monotonic() - t0 < args.time:
        batch = list(itertools.islice(draws, min(ROUND, args.budget - len(cases))))
        if not batch:
            break
        cases += batch
        rows += driver.rows(Plan.of(batch, lambda _: impls))
    fz = failures(rows)
    by_id = {c.id: c for c in cases}
    t_fuzz = time.monotonic() - t0
    print(f"{op}: ci {t_ci:.0f} s, {len(cases)} drawn cases {t_fuzz:.0f} s, "
          f"{len(impls)} targets", file=sys.stderr, flush=True)

    def shrunk_block(impl, label, core, members, k, n):
        first = min(members, key=lambda m: input_numel(spec, by_id[m[1].case_id].params))[1]
        deadline = time.monotonic() + args.shrink_time
        shrunk = shrink(spec, dict(by_id[first.case_id].params), first,
                        lambda p: driver.rows(Plan.single(spec, fuzz_case(spec, p), impl))[0],
                        lambda p: refusal(spec, impl, p, "cpu") is None,
                        args.shrink_tries, stop=lambda: time.monotonic() > deadline)
        case = fuzz_case(spec, shrunk.params)
        name = case_name(f"fuzz-{label}" + (f"-{k}" if n > 1 else ""))
        block = case_block(spec, shrunk.params, name, case.seed, [
            f"found by scripts/fuzz_ci_gaps.py on {label} ({impl.kind}), missed by the ci "
            f"profile: {core}", f"shrunk from {first.case_id} in {shrunk.steps} steps "
            f"({shrunk.tries} tries): {shrunk.row.reason}"])
        return block, f"{core}: {input_numel(spec, shrunk.params)} elements"

    lines, blocks, missed = [], [], 0
    for impl, label in tgts:
        mine_ci = ci.get(impl.name, [0, {}])
        mine_fz = fz.get(impl.name, [0, {}])
        other = [(core, members) for core, members in mine_fz[1].items()
                 if core not in mine_ci[1]]
        gap = caught(mine_fz) > 0 and caught(mine_ci) == 0
        missed += gap
        todo = list(mine_fz[1].items()) if gap else other if args.groups else []
        todo = [(c, [x for x in m if not x[0].yardstick_too] or m) for c, m in todo]
        shrunk = []
        for k, (core, members) in enumerate(todo, start=1):
            block, cell = shrunk_block(impl, label, core, members, k, len(todo))
            blocks.append(block)
            shrunk.append(cell)
        lines.append(
            f"| {op} | `{label}` | {impl.kind} | {caught(mine_ci)}/{mine_ci[0]} | "
            f"{caught(mine_fz)}/{mine_fz[0]} | {'; '.join(str(c) for c, _ in other) or '-'} | "
            f"{'; '.join(shrunk) or '-'} |" + (" **missed by ci**" if gap else ""))
        print(lines[-1], file=sys.stderr, flush=True)
    return lines, blocks, missed


def main(argv=None) -> int:
    import torch

    from bwd_suite.suite import registry
    from bwd_suite.suite.fuzz.sizes import SIZES
    from bwd_suite.suite.runner import RunOptions

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--op", action="append", help="an op (repeatable; default all)")
    ap.add_argument("--target", action="append", help="a mutant's or port's name")
    ap.add_argument("--budget", type=int, default=300, help="drawn cases per op at most")
    ap.add_argument("--time", type=float, default=240.0,
                    help="seconds at most of an op's drawn cases (all its targets)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--size", choices=tuple(SIZES), default="small")
    ap.add_argument("--shrink-tries", type=int, default=100)
    ap.add_argument("--shrink-time", type=float, default=30.0,
                    help="seconds at most to shrink one gap")
    ap.add_argument("--groups", action="store_true",
                    help="also shrink the failure groups ci does not show of targets it catches")
    ap.add_argument("--no-mutants", action="store_true")
    ap.add_argument("--no-ports", action="store_true")
    args = ap.parse_args(argv)

    torch.set_num_threads(1)  # as run's workers on a CPU
    registry.discover()
    cpu = torch.device("cpu")
    # as `python -m bwd_suite fuzz` (--repeats 2: a nondeterministic target is found too)
    opts = RunOptions(device=cpu, golden_device=cpu, repeats=2, timing=False)
    lines = ["| op | target | kind | ci items failed | drawn cases failed | fuzz failure "
             "groups ci does not show | shrunk |", "|---|---|---|---|---|---|---|"]
    blocks, missed, n = [], 0, 0
    for op in args.op or sorted(registry.ops()):
        tgts = targets(op, args.target, not args.no_mutants, not args.no_ports)
        if tgts:
            more_lines, more_blocks, more_missed = run_op(op, tgts, args, opts)
            lines += more_lines
            blocks += more_blocks
            missed += more_missed
            n += len(tgts)
    print("\n".join(lines))
    for b in blocks:
        print("\n" + b)
    print(f"\n{missed} of {n} targets caught by the fuzzer (seed {args.seed}, size "
          f"{args.size}, up to {args.budget} cases or {args.time:g} s an op) and missed by "
          f"the ci profile")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
