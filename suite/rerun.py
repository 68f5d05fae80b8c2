"""`run --rerun-failed RESULTS`: exactly the items of earlier runs that counted against
them (failed, raised or timed out without a declared known failure, or passed against
one), as a plan of the same cases and implementations.

A results file is data, perhaps downloaded from a nightly job: the implementation names in
it are looked up among the registered implementations of their op and the ones `--impl`
names on the same command line, never imported. An external implementation
(`module:object`) therefore runs again only when the command line names it; any other
name is refused, before anything runs, with the `--impl` that would allow it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bwd_suite.suite.errors import SuiteInputError
from bwd_suite.suite.plan import CasePlan, Plan


@dataclass(frozen=True)
class Failed:
    """One implementation to run again on a case, and the results file that asked."""

    op: str
    case_id: str
    impl: str
    source: Path
    origin: str = ""  # where an outside implementation was loaded from (impl_origin)


def failed_rows(paths) -> list[Failed]:
    """The items that counted against the runs, in the runs' order; the latest row of an
    item decides."""
    from bwd_suite.suite.results import read_rows, result_files

    latest = {}
    for f in result_files(paths):
        for row in read_rows([f]):
            latest[(row.op, row.case_id, row.impl)] = (row, f)
    return [Failed(op, case_id, impl, f, row.impl_origin or "")
            for (op, case_id, impl), (row, f) in latest.items() if row.counts_against]


def given_implementations(args, failed: list) -> dict:
    """(op, name) -> Implementation of every external one that --impl names (imported: the
    command line asked for it). `module:object` without an op is bound to the ops of the
    failing rows that name it; else it is a decorated object (of its own op) or of --op."""
    from bwd_suite.suite import registry
    from bwd_suite.suite.selection import impl_names

    given = {}
    for spec in impl_names(getattr(args, "impl", None)) or ():
        if ":" not in spec:
            continue  # a registered name: allowed anyway
        head, _, obj = spec.partition(":")
        op_name, eq, module = head.rpartition("=")
        named = f"{module}:{obj}"
        ops = [] if eq else sorted({f.op for f in failed if f.impl == named})
        refs = [(f"{op}={named}", None) for op in ops] or [(spec, getattr(args, "op", None))]
        for ref, default_op in refs:
            impl = registry.external_implementation(ref, default_op)
            given[(impl.op, impl.name)] = impl
    return given


def resolve_failed(item: Failed, given: dict):
    """The implementation a failing row names: a registered one of its op, or one that
    --impl gave; anything else is refused, naming the file and how to allow it."""
    from bwd_suite.suite import registry
    from bwd_suite.suite.text import terminal

    registered = {i.name: i for i in registry.implementations(item.op)}
    impl = registered.get(item.impl) or given.get((item.op, item.impl))
    if impl is not None:
        return impl
    allow = (f"--impl {terminal(item.origin)}" if item.origin
             else f"--impl {terminal(item.op)}={terminal(item.impl)}" if ":" in item.impl
             else "--impl OP=module:object")
    raise SuiteInputError("--rerun-failed",
                          f"{item.source}: implementation {item.impl!r} of {item.op!r} is not "
                          f"registered and not given with --impl; a results file never makes "
                          f"the suite import code: to run it again, allow it with {allow}")


def rerun_selection(args):
    """The Selection of --rerun-failed: the failing items' cases (whatever profile held
    them) with the implementations that failed them."""
    from bwd_suite.suite import cases as cases_mod
    from bwd_suite.suite import registry
    from bwd_suite.suite.selection import Selection, parse_device

    failed = failed_rows(args.rerun_failed)
    if not failed:
        raise SuiteInputError("--rerun-failed", "the results hold no failing item")
    dev = parse_device(args.device)
    wanted: dict = {}
    for item in failed:
        wanted.setdefault((item.op, item.case_id), []).append(item)
    by_id = {(c.op, c.id): c for c in cases_mod.load_cases(args.cases or ())}
    missing = [case_id for (op, case_id) in wanted if (op, case_id) not in by_id]
    if missing:
        raise SuiteInputError("--rerun-failed", f"{len(missing)} failing cases are not in "
                                                f"the case files now, e.g. {missing[0]!r}")
    given = given_implementations(args, failed)
    entries = [CasePlan(registry.op(op), by_id[(op, case_id)],
                        tuple(resolve_failed(item, given) for item in items))
               for (op, case_id), items in wanted.items()]
    return Selection(dev, "rerun", Plan(tuple(entries)))
