"""Run the mutant zoo (implementations of kind "mutant") through the suite.

Every mutant runs on every case of the profile (correctness only, one call per item).
A mutant is caught when at least one item fails; its diagnosis is the cross-case one of
suite/diagnosis/ over all its items, compared with the cause the mutant declares as
`planted_cause` on its function. Scores are per op. Exit 0 when, for every op, every
mutant is caught and the diagnosis names the planted cause for at least 90% of them, 1
otherwise, 2 on bad input.

Mutant names, causes and diagnoses can quote what a mutant raised or a case id: the table
shows them through suite.text (terminal, or markdown cells and code spans).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from datetime import date
from typing import Callable, Optional, Sequence

from bwd_suite.suite.outcomes import Verdict
from bwd_suite.suite.text import code_span, markdown_cell, terminal

HELP = "run the deliberately broken implementations: mutation score and diagnosis accuracy"
MIN_ACCURACY = 0.9


@dataclass(frozen=True)
class MutantResult:
    op: str
    name: str
    planted: Optional[str]  # the cause the mutant declares, None if it declares none
    n_items: int
    n_failed: int
    diagnosis: object  # suite.diagnosis.RunDiagnosis

    @property
    def caught(self) -> bool:
        return self.n_failed > 0

    @property
    def correct(self) -> bool:
        return self.planted is not None and self.diagnosis.cause == self.planted


@dataclass(frozen=True)
class ZooReport:
    profile: str
    device: str
    n_cases: int
    results: tuple  # MutantResult
    seconds: float
    cases_by_op: tuple = ()  # (op, number of cases), in the order the ops ran

    @property
    def mutation_score(self) -> float:
        return sum(r.caught for r in self.results) / len(self.results)

    @property
    def accuracy(self) -> float:
        return sum(r.correct for r in self.results) / len(self.results)

    def ops(self) -> list:
        return sorted({r.op for r in self.results})

    def of(self, op: str) -> "ZooReport":
        """The part of the report for one op's mutants."""
        n = dict(self.cases_by_op).get(op, 0)
        return ZooReport(self.profile, self.device, n,
                         tuple(r for r in self.results if r.op == op), self.seconds,
                         ((op, n),))

    @property
    def ok(self) -> bool:
        """Every op on its own: every mutant caught, the planted cause named for at least
        MIN_ACCURACY of them (an op with few mutants cannot hide behind another)."""
        return all(part.mutation_score == 1.0 and part.accuracy >= MIN_ACCURACY
                   for part in map(self.of, self.ops()))


def select_mutants(names: Optional[Sequence[str]] = None, op: Optional[str] = None) -> list:
    """Mutant implementations (all of the op, or the named ones)."""
    from bwd_suite.suite import registry
    from bwd_suite.suite.errors import SuiteInputError, did_you_mean

    found = [i for i in registry.implementations(op) if i.kind == "mutant"]
    if not names:
        return found
    known = {i.name: i for i in found}
    for n in names:
        if n not in known:
            raise SuiteInputError("--mutant", did_you_mean(n, known))
    return [known[n] for n in names]


def run_zoo(mutants: Sequence, profile: str = "ci", device: str = "cpu",
            case_filter: Callable = lambda case: True, on_row: Callable = None) -> ZooReport:
    """Run `mutants` over the profile's cases; rows go to `on_row` as they come."""
    import torch

    from bwd_suite.suite.cases import load_cases
    from bwd_suite.suite.diagnosis import diagnose_run
    from bwd_suite.suite.driver import Driver, Each, Rows, Tee
    from bwd_suite.suite.plan import Plan
    from bwd_suite.suite.runner import RunOptions

    started = time.monotonic()
    dev = torch.device(device)
    driver = Driver(RunOptions(device=dev, golden_device=dev, repeats=1, timing=False))
    results, n_cases, by_op = [], 0, []
    for op_name in sorted({m.op for m in mutants}):
        impls = [m for m in mutants if m.op == op_name]
        cases = [c for c in load_cases(op=op_name, profile=profile) if case_filter(c)]
        n_cases += len(cases)
        by_op.append((op_name, len(cases)))
        rows = Rows()
        driver.run(Plan.of(cases, lambda op: impls), Tee(rows, Each(on_row)) if on_row else rows)
        by_impl = {d.impl: d for d in diagnose_run(rows)}
        for m in impls:
            mine = [r for r in rows if r.impl == m.name and r.verdict.compared]
            results.append(MutantResult(
                op_name, m.name, getattr(m.fn, "planted_cause", None), len(mine),
                sum(r.verdict is Verdict.FAIL for r in mine), by_impl[m.name]))
    return ZooReport(profile, str(dev), n_cases, tuple(results),
                     time.monotonic() - started, tuple(by_op))


def _score_line(part: ZooReport) -> str:
    n = len(part.results)
    return (f"mutation score {sum(r.caught for r in part.results)}/{n} "
            f"({part.mutation_score:.0%}), diagnosis accuracy "
            f"{sum(r.correct for r in part.results)}/{n} ({part.accuracy:.0%})")


def render(report: ZooReport, markdown: bool = False, verbose: bool = False) -> str:
    """One table per op, each with its score line, then the totals."""
    head = ("mutant", "caught by", "diagnosis", "planted cause", "named")
    every = [(r, (r.name, f"{r.n_failed} of {r.n_items}", r.diagnosis.title or "-",
                  r.planted or "-", "yes" if r.correct else "NO")) for r in report.results]
    widths = [max(len(terminal(x[i])) for x in [c for _, c in every] + [head])
              for i in range(len(head))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    lines = []
    for op in report.ops():
        part = report.of(op)
        mine = [(r, c) for r, c in every if r.op == op]
        score = f"{terminal(op)}: {_score_line(part)}; {part.n_cases} cases"
        if markdown:
            lines += [f"### {terminal(op)}", "", "| " + " | ".join(head) + " |",
                      "|" + "---|" * len(head)]
            lines += ["| " + " | ".join((code_span(a), b, markdown_cell(c), code_span(d), e))
                      + " |" for _, (a, b, c, d, e) in mine]
            lines += ["", score + ".", ""]
            continue
        lines += [fmt.format(*head), "-" * (sum(widths) + 2 * (len(widths) - 1))]
        for r, cells in mine:
            lines.append(fmt.format(*map(terminal, cells)))
            if verbose or not r.correct or not r.caught:
                lines.append(f"    {terminal(r.diagnosis.text)}")
        lines += [score, ""]
    total = (f"all ops: {_score_line(report)}; profile {terminal(report.profile)}, "
             f"{report.n_cases} cases, {terminal(report.device)}, {report.seconds:.0f} s")
    if markdown:
        total += f", {date.today().isoformat()}"
    return "\n".join(lines + [total])


def add_arguments(parser) -> None:
    parser.add_argument("--profile", default="ci", metavar="NAME",
                        help="cases to run the mutants on (default ci: the CPU CI's cases)")
    parser.add_argument("--mutant", action="append", metavar="NAME",
                        help="only this mutant (repeatable; default: all)")
    parser.add_argument("--op", metavar="OP", help="only the mutants of this op")
    parser.add_argument("--device", default="cpu", metavar="DEV",
                        help="torch device (default cpu)")
    parser.add_argument("--markdown", action="store_true",
                        help="print the table as markdown (for docs/mutants.md)")
    parser.add_argument("--verbose", action="store_true",
                        help="the one-line run diagnosis under every mutant")


def main(args) -> int:
    from bwd_suite.suite import cases as cases_mod
    from bwd_suite.suite import registry
    from bwd_suite.suite.errors import SuiteInputError

    cases_mod.profile_names(args.profile)
    if args.op:
        registry.op(args.op, where="--op")
    mutants = select_mutants(args.mutant, args.op)
    if not mutants:
        raise SuiteInputError("--op", f"{args.op!r} has no mutants")
    print(f"running {len(mutants)} mutants on profile {args.profile} ({args.device})",
          file=sys.stderr)
    report = run_zoo(mutants, profile=args.profile, device=args.device)
    print(render(report, markdown=args.markdown, verbose=args.verbose))
    return 0 if report.ok else 1
