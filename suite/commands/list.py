"""Show the ops and their parameters, how many cases each profile holds, and every
implementation with whether it can run here. --impl and --case narrow the listing as they
narrow a run.

Case ids and sweep names come from case files (and --impl can import any module): every
name, reason and doc goes through suite.text.terminal, so that none reaches the terminal
raw."""

from __future__ import annotations

from bwd_suite.suite.text import terminal

HELP = "show ops, cases per profile and implementations"


def add_arguments(p) -> None:
    from bwd_suite.suite.cli import add_selection

    add_selection(p)
    p.add_argument("--ids", action="store_true", help="also list every selected case id")


def _implementations(args) -> list:
    """The implementations to show: every one of the selected ops, or those of --impl."""
    from bwd_suite.suite import registry
    from bwd_suite.suite.selection import impl_names, implementations_by_op

    names = impl_names(args.impl)
    if not names:
        return registry.implementations(args.op)
    by_op = implementations_by_op(names, include_mutants=True, default_op=args.op)
    return [i for o, impls in by_op.items() if args.op in (None, o) for i in impls]


def _covering_section(coverage: list, op) -> None:
    """Per op: the cases its covering sweeps (combine/strength) make against the
    combinations their cartesian products would hold, each sweep, and the value tuples
    that no valid case can hold (reported, not errors)."""
    shown = [s for s in coverage if op in (None, s.op)]
    if not shown:
        return
    print("\ncovering sweeps (cases made, against the combinations of the cartesian "
          "product):")
    for o in sorted({s.op for s in shown}):
        mine = [s for s in shown if s.op == o]
        n = len(mine)
        print(f"  {terminal(o):<20} {n} sweep{'' if n == 1 else 's'}: "
              f"{sum(s.cases for s in mine):,} cases against {sum(s.product for s in mine):,}")
        for s in mine:
            way = "pairwise" if s.strength == 2 else f"strength {s.strength}"
            print(f"    {terminal(s.file)} \"{terminal(s.name)}\" ({way}): {s.cases:,} "
                  f"against {s.product:,}"
                  + (f", {len(s.uncoverable)} not coverable" if s.uncoverable else ""))
            for u in s.uncoverable:
                print(f"      not coverable: {terminal(u.text())}: {terminal(u.reason)}")


def main(args) -> int:
    from bwd_suite.suite import cases as cases_mod
    from bwd_suite.suite import registry
    from bwd_suite.suite.selection import default_profile, matching, max_sweep, parse_device

    if args.op:
        registry.op(args.op, where="--op")
    if args.profile:
        cases_mod.profile_names(args.profile)
    dev = parse_device(args.device)
    impls = _implementations(args)
    coverage = []  # a SweepCoverage for every covering sweep
    all_cases = cases_mod.load_cases(args.cases or (), op=args.op, max_sweep=max_sweep(args),
                                     coverage=coverage)
    all_cases = matching(all_cases, args.case, "of any profile" + (
        f" of op {args.op}" if args.op else ""))
    print("ops:")
    for name, spec in registry.ops().items():
        if args.op and name != args.op:
            continue
        print(f"  {terminal(name)}: {terminal(spec.doc)}")
        print(f"    params: {terminal(', '.join(p.name for p in spec.params.params))}")
    _covering_section(coverage, args.op)
    print("\ncases per profile" + (" (matching --case)" if args.case else "") + ":")
    print(f"  {'op':<20}" + "".join(f"{p:>9}" for p in cases_mod.PROFILES))
    for o in sorted({c.op for c in all_cases}):
        counts = [sum(c.op == o and c.in_profile(p) for c in all_cases)
                  for p in cases_mod.PROFILES]
        print(f"  {terminal(o):<20}" + "".join(f"{n:>9}" for n in counts))
    print(f"\nimplementations (device {dev}):")
    for impl in impls:
        status = impl.unsupported_reason({}, dev.type) if not impl.enabled or \
            dev.type not in impl.devices else None
        state = f"unavailable: {terminal(status)}" if status else "available"
        label = terminal(f"{impl.op}/{impl.name}")
        print(f"  {label:<46} {terminal(impl.kind):<10} {terminal(','.join(impl.devices)):<9} "
              f"{state}  {terminal(impl.doc)}")
    if args.ids:
        profile = args.profile or default_profile(dev)
        print(f"\ncase ids in profile {profile}:")
        for c in all_cases:
            if c.in_profile(profile):
                print(f"  {terminal(c.id)}")
    return 0
