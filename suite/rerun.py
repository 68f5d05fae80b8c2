"""`run --rerun-failed RESULTS`: exactly the items of earlier runs that counted against
them (failed, raised or timed out without a declared known failure, or passed against
one), as a plan of the same cases and implementations."""

from __future__ import annotations

from suite.errors import SuiteInputError
from suite.plan import CasePlan, Plan


def failed_items(paths) -> dict:
    """(op, case id) -> implementation names to run again, in the runs' order; the latest
    row of an item decides."""
    from suite.results import read_rows

    latest = {}
    for row in read_rows(paths):
        latest[(row.op, row.case_id, row.impl)] = row
    wanted: dict = {}
    for (op, case_id, impl), row in latest.items():
        if row.counts_against:
            wanted.setdefault((op, case_id), []).append(impl)
    return wanted


def rerun_selection(args):
    """The Selection of --rerun-failed: the failing items' cases (whatever profile held
    them) with the implementations that failed them."""
    from suite import cases as cases_mod
    from suite import registry
    from suite.selection import Selection, parse_device

    wanted = failed_items(args.rerun_failed)
    if not wanted:
        raise SuiteInputError("--rerun-failed", "the results hold no failing item")
    dev = parse_device(args.device)
    by_id = {(c.op, c.id): c for c in cases_mod.load_cases(args.cases or ())}
    missing = [cid for key, cid in ((k, k[1]) for k in wanted) if key not in by_id]
    if missing:
        raise SuiteInputError("--rerun-failed", f"{len(missing)} failing cases are not in "
                                                f"the case files now, e.g. {missing[0]!r}")
    entries = []
    for (op, case_id), names in wanted.items():
        refs = [n if ":" not in n or "=" in n.split(":")[0] else f"{op}={n}" for n in names]
        impls = registry.select_implementations(op, refs, include_mutants=True)
        entries.append(CasePlan(registry.op(op), by_id[(op, case_id)], tuple(impls)))
    return Selection(dev, "rerun", Plan(tuple(entries)))
