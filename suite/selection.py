"""From the command line's selection (device, profile, op, cases, implementations) to a
plan, validated before anything runs: a bad name is a SuiteInputError naming the flag."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from bwd_suite.suite.errors import SuiteInputError
from bwd_suite.suite.plan import Plan


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def parse_device(name: Optional[str], flag: str = "--device"):
    """A torch.device for `name` (default: cuda when available), with a CUDA index."""
    import torch

    name = name or default_device()
    try:
        dev = torch.device(name)
    except RuntimeError as e:
        raise SuiteInputError(flag, f"{name!r} is not a torch device: {e}") from None
    if dev.type not in ("cpu", "cuda"):
        raise SuiteInputError(flag, f"{name!r}: the suite runs on cpu or cuda devices, not "
                                    f"{dev.type}")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise SuiteInputError(flag, f"{name!r}: CUDA is not available on this machine")
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    return dev


def default_profile(device) -> str:
    return "gpu" if device.type == "cuda" else "smoke"


def impl_names(text: Optional[str]) -> Optional[list]:
    """--impl's comma-separated names, None when not given."""
    return [n.strip() for n in text.split(",") if n.strip()] if text else None


@dataclass(frozen=True)
class Selection:
    device: object  # torch.device
    profile: str
    plan: Plan


def max_sweep(args):
    """The loader's sweep-size limit: none with --allow-large."""
    from bwd_suite.suite.cases import MAX_SWEEP

    return None if getattr(args, "allow_large", False) else MAX_SWEEP


def id_matches(pattern: str, case_id: str) -> bool:
    """--case's test: the id contains `pattern`, or, for one ending in `$`, ends with the
    rest (as a known_failures pattern): a whole id with `$` picks that case alone, never
    the longer ids that extend it (R13-N1-fp32 and R13-N1-fp32-drop)."""
    return case_id.endswith(pattern[:-1]) if pattern.endswith("$") else pattern in case_id


def matching(cases: list, patterns: Optional[list], scope: str) -> list:
    """The cases whose id matches any of --case's texts (id_matches); none is bad input,
    blamed on --case (`scope` says which cases were searched, e.g. "of profile ci")."""
    if not patterns:
        return cases
    found = [c for c in cases if any(id_matches(s, c.id) for s in patterns)]
    if cases and not found:
        texts = " or ".join(map(repr, patterns))
        raise SuiteInputError("--case", f"no case id {scope} contains {texts}")
    return found


def implementations_by_op(names: Optional[list], include_mutants=False,
                          default_op: Optional[str] = None) -> dict:
    """op -> the implementations of --impl for it, every name checked once, whichever
    ops the cases hold."""
    from bwd_suite.suite import registry

    return {o: registry.select_implementations(o, names, include_mutants, default_op)
            for o in registry.ops()}


def bound_ops(impls_by_op: dict) -> set:
    """The ops that --impl's outside implementations (OP=module:object, or decorated) are
    bound to."""
    return {o for o, impls in impls_by_op.items() for i in impls if i.origin}


def select(args) -> Selection:
    """The plan of `args` (--device, --profile, --op, --cases, --case, --impl,
    --include-mutants, --allow-large)."""
    from bwd_suite.suite import cases as cases_mod
    from bwd_suite.suite import registry

    dev = parse_device(args.device)
    profile = args.profile or default_profile(dev)
    cases_mod.profile_names(profile)
    if args.op:
        registry.op(args.op, where="--op")
    names = impl_names(args.impl)
    mutants = getattr(args, "include_mutants", False)
    impls = implementations_by_op(names, mutants, args.op)
    cases = cases_mod.load_cases(args.cases or (), op=args.op, profile=profile,
                                 max_sweep=max_sweep(args))
    bound = bound_ops(impls) if not args.op else set()
    if bound:  # an implementation bound to an op implies that op
        cases = [c for c in cases if c.op in bound]
    scope = f"of profile {profile}" + (f" and op {args.op}" if args.op else
                                       f" and op {', '.join(sorted(bound))}" if bound else "")
    cases = matching(cases, args.case, scope)
    plan = Plan.of(cases, impls.__getitem__)
    if names and not plan.entries:
        raise SuiteInputError("--impl", f"{args.impl!r} implements none of the selected ops")
    return Selection(dev, profile, plan)
