"""Compile every implementation that needs a build (CUDA extensions) ahead of a run, so
that no item's time or verdict includes a compilation."""

from __future__ import annotations

import sys
import time

HELP = "build the CUDA extensions of the implementations ahead of a run"


def add_arguments(p) -> None:
    p.add_argument("--op", metavar="OP", help="only this op's implementations (default: all)")
    p.add_argument("--impl", metavar="NAMES",
                   help="comma-separated implementations to build (default: all with a build)")


def main(args) -> int:
    from bwd_suite.suite import registry
    from bwd_suite.suite.errors import SuiteInputError

    if args.op:
        registry.op(args.op, where="--op")  # an unknown op: its did-you-mean error
    wanted = {n.strip() for n in args.impl.split(",")} if args.impl else None
    impls = [i for i in registry.implementations(args.op) if i.build is not None
             and (wanted is None or i.name in wanted)]
    if not impls:
        scope = f" of {args.op}" if args.op else ""
        among = f" among {sorted(wanted)}" if wanted else ""
        raise SuiteInputError("--impl" if wanted else "--op",
                              f"no implementation{scope} with a build{among}")
    failed = 0
    for impl in impls:
        if not impl.enabled:
            print(f"{impl.op}/{impl.name}: skipped ({impl.disabled_reason})")
            continue
        start = time.perf_counter()
        try:
            impl.build()
            print(f"{impl.op}/{impl.name}: built in {time.perf_counter() - start:.1f}s")
        except Exception as e:  # noqa: BLE001 - reported, the others still build
            failed += 1
            print(f"{impl.op}/{impl.name}: FAILED: {e}", file=sys.stderr)
    return 1 if failed else 0
