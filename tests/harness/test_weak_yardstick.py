"""The same arithmetic gets the same verdict whatever its name (issue 41 item 5): where the
yardstick is weaker than the bound (eager 16-bit conv1d sums dweight in 16 bits on the
CPU), its own items are not passed by their name but get the declared outcome
`weak_yardstick` (their outputs are the yardstick's own, bit for bit), as does its function
registered under a second name and loaded from outside as `module:function`; the outcome is
listed apart in the summary and the report, and any other arithmetic as far off fails."""

import pytest
import torch

from bwd_suite.reports import render
from bwd_suite.suite import registry, results, summary, tolerances
from bwd_suite.suite.cases import load_cases
from bwd_suite.suite.opspec import OutputSpec, TolClass
from bwd_suite.suite.outcomes import FailureKind, Verdict
from bwd_suite.suite.registry import Implementation
from bwd_suite.suite.roofline import Ceilings
from bwd_suite.suite.runner import CaseContext, RunOptions, run_item
from bwd_suite.suite.verdicts import check_output

CPU = torch.device("cpu")
CEIL = Ceilings(device_name="cpu", copy_gbps=None, copy_source="none", peak_tflops=None)
OPTS = RunOptions(device=CPU, golden_device=CPU, repeats=2, timing=False)
N_CASES = 4  # ci cases of conv1d of each dtype kind: 16-bit (weak yardstick) and fp32


@pytest.fixture(scope="module")
def rows():
    spec = registry.op("causal_conv1d")
    ref = registry.select_implementations("causal_conv1d", ["torch_ref"])[0]
    again = Implementation(op="causal_conv1d", name="torch_ref_again", fn=ref.fn,
                           kind="reference")
    outside = registry.external_implementation(
        "causal_conv1d=tests.faults.yardstick_copy:conv1d")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        found = []
        cases = load_cases(op="causal_conv1d", profile="ci")
        picked = [c for c in cases if c.params["dtype"] != "float32"][:N_CASES] + \
            [c for c in cases if c.params["dtype"] == "float32"][:N_CASES // 2]
        for case in picked:
            ctx = CaseContext(spec, case, OPTS)
            found += [run_item(ctx, impl, None, CEIL, {}) for impl in (ref, again, outside)]
    finally:
        torch.set_num_threads(before)
    return found


def test_the_yardstick_under_another_name_gets_the_same_verdicts(rows):
    by_case = {}
    for r in rows:
        by_case.setdefault(r.case_id, {})[r.impl] = r.verdict
    names = {"torch_ref", "torch_ref_again", "causal_conv1d=tests.faults.yardstick_copy:conv1d",
             "tests.faults.yardstick_copy:conv1d"}
    for case_id, verdicts in by_case.items():
        assert set(verdicts) <= names and len(verdicts) == 3
        assert len(set(verdicts.values())) == 1, (case_id, verdicts)
    seen = {v for vs in by_case.values() for v in vs.values()}
    assert seen == {Verdict.PASS, Verdict.WEAK_YARDSTICK}, seen


def test_a_weak_yardstick_item_says_so_and_is_not_a_failure(rows):
    weak = [r for r in rows if r.verdict is Verdict.WEAK_YARDSTICK]
    r = next(r for r in weak if r.impl == "torch_ref")
    assert r.yardstick_note and "as weak as the yardstick" in r.reason and "dweight" in r.reason
    assert not r.counts_against and not r.expected and r.failure_kind is None
    assert r.verdict.compared and not r.verdict.bad
    # the 16-bit cases are the weak ones; an fp32 case never is
    assert all("-fp32" not in x.case_id for x in weak)


def test_the_summary_and_the_report_list_them_apart(rows, tmp_path):
    text = summary.render(rows, full_reasons=True)
    n = sum(r.verdict is Verdict.WEAK_YARDSTICK for r in rows)
    assert f"{n} items as weak as the yardstick" in text
    assert f"{n} as weak as the yardstick" in text.splitlines()[-1]
    assert "causal_conv1d/torch_ref: " in text and "failing items" not in text
    path = tmp_path / "run.parquet"
    with results.ResultsWriter(path) as w:
        for r in rows:
            w.append(r)
    report = render.build(results.read_results([path]))
    assert report.weak.n_total == n
    assert {g.impl for g in report.weak.groups} >= {"torch_ref", "torch_ref_again"}
    page = render.render(report)
    assert 'id="weak-yardstick"' in page and "weak_yardstick" in page
    assert report.failures.n_total == 0


def test_only_the_yardstick_s_own_bits_are_declared_any_other_arithmetic_fails():
    """One bf16 output where the yardstick is 6 ulps off (weak): its own output bit for
    bit is weak_yardstick; another output exactly as far off (other bits) fails, as does
    one further off; the verdict reads the values only, never a name."""
    eps = torch.finfo(torch.bfloat16).eps
    golden = torch.ones(64, dtype=torch.float64)
    spec = OutputSpec("dweight", TolClass.REDUCTION)
    yard = (golden + 6 * eps).to(torch.bfloat16)
    ref_err = 6 * eps
    assert tolerances.weak_yardstick(TolClass.REDUCTION, torch.bfloat16, torch.bfloat16,
                                     ref_err)

    def check(actual):
        return check_output(spec, actual, golden, ref_err, torch.bfloat16, yardstick=yard)

    same = check(yard.clone())
    assert same.weak and same.failure is None and same.err > same.allowed
    assert "bit for bit the yardstick's own output" in same.message
    mirrored = check((golden - 6 * eps).to(torch.bfloat16))  # as far off, other bits
    assert mirrored.failure is FailureKind.MISMATCH and not mirrored.weak
    assert check((golden + 32 * eps).to(torch.bfloat16)).failure is FailureKind.MISMATCH
    ok = check(golden.to(torch.bfloat16))
    assert ok.failure is None and not ok.weak
