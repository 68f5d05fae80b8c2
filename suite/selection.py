"""From the command line's selection (device, profile, op, cases, implementations) to a
plan, validated before anything runs: a bad name is a SuiteInputError naming the flag."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from suite.errors import SuiteInputError
from suite.plan import Plan


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


def select(args) -> Selection:
    """The plan of `args` (--device, --profile, --op, --cases, --case, --impl,
    --include-mutants)."""
    from suite import cases as cases_mod
    from suite import registry

    dev = parse_device(args.device)
    profile = args.profile or default_profile(dev)
    cases_mod.profile_names(profile)
    if args.op:
        registry.op(args.op, where="--op")
    cases = cases_mod.load_cases(args.cases or (), op=args.op, profile=profile)
    if args.case:
        cases = [c for c in cases if any(s in c.id for s in args.case)]
    names = impl_names(args.impl)
    mutants = getattr(args, "include_mutants", False)
    plan = Plan.of(cases, lambda op: registry.select_implementations(op, names, mutants))
    if names and not plan.entries:
        raise SuiteInputError("--impl", f"{args.impl!r} implements none of the selected ops")
    return Selection(dev, profile, plan)
