"""Claims need contrast (suite/diagnosis/): a run-level "fails only with X" is printed only
with comparable cases without X that pass, and with its counts; a per-item "only in ..."
only where a comparable part of the axis passed. Two ordinary softmax ports with bugs of
issue 41, run over the ci cases: one whose condition covers every case (the row-sum term
forgotten: it shows wherever rows are not so long that the term is below the bound), one
with a real condition (the dropout scale forgotten)."""

import re

import numpy as np
import pytest
import torch

from bwd_suite.suite import registry, summary
from bwd_suite.suite.cases import load_cases
from bwd_suite.suite.diagnosis import axis_patterns, diagnose_run
from bwd_suite.suite.registry import Implementation
from bwd_suite.suite.roofline import Ceilings
from bwd_suite.suite.runner import CaseContext, RunOptions, run_item

CPU = torch.device("cpu")
CEIL = Ceilings(device_name="cpu", copy_gbps=None, copy_source="none", peak_tflops=None)
OPTS = RunOptions(device=CPU, golden_device=CPU, repeats=1, timing=False)


def _g(dy, mask, scale):
    g = dy.float()
    return g if mask is None else g * mask * scale


def no_rowsum(*, y, dy, mask, scale, out):
    """dx = y * g: the term y * rowsum(y * g) forgotten (in every case)."""
    out["dx"].copy_(y.float() * _g(dy, mask, scale))


def no_dropout_scale(*, y, dy, mask, scale, out):
    """g = dy * mask: the dropout scale 1/(1-p) forgotten (fails with dropout, p > 0)."""
    yf, g = y.float(), _g(dy, mask, 1.0)
    out["dx"].copy_(yf * (g - (g * yf).sum(-1, keepdim=True)))


@pytest.fixture(scope="module")
def runs():
    """Rows of both ports on every ci case of softmax (one intra-op thread)."""
    spec = registry.op("softmax")
    impls = [Implementation(op="softmax", name=f.__name__, fn=f, kind="external")
             for f in (no_rowsum, no_dropout_scale)]
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        rows = [run_item(CaseContext(spec, c, OPTS), i, None, CEIL, {})
                for c in load_cases(op="softmax", profile="ci") for i in impls]
    finally:
        torch.set_num_threads(before)
    return rows


def _run_line(rows, impl) -> str:
    return next(d.text for d in diagnose_run(r for r in rows if r.impl == impl))


def test_a_bug_whose_condition_covers_every_case_claims_no_condition(runs):
    mine = [r for r in runs if r.impl == "no_rowsum"]
    # the bug is in every case; long rows alone hide it (their dot is below the bound)
    assert sum(r.verdict == "fail" for r in mine) >= 0.9 * len(mine)
    line = _run_line(runs, "no_rowsum")
    assert "only" not in line and "never fails" not in line, line
    printed = summary.render(mine, full_reasons=True)
    assert "fails only" not in printed and "never fails" not in printed


def test_a_bug_with_a_real_condition_claims_it_with_its_counts(runs):
    line = _run_line(runs, "no_dropout_scale")
    m = re.search(r"fails only with dropout and p > 0 \(a scale other than 1\) \(fails "
                  r"(\d+) of (\d+) comparable cases with it, 0 of (\d+) without\)", line)
    assert m, line
    fail_with, with_, without = map(int, m.groups())
    mine = [r for r in runs if r.impl == "no_dropout_scale"]
    assert fail_with == sum(r.verdict == "fail" for r in mine) and with_ >= fail_with
    assert without >= 1
    # every dropout case has two rows or more: more than one row is no condition it shows
    assert "more than one row" not in line, line
    assert "fails only with dropout" in summary.render(mine, full_reasons=True)


def _bad(n_rows, n_cols, wrong_cols, noise_cols=()):
    bad = torch.zeros(n_rows, n_cols, dtype=torch.bool)
    bad[:, list(wrong_cols)] = True
    for c in noise_cols:  # one wrong element in each of these columns
        bad[0, c] = True
    return bad


def test_only_in_the_last_tile_needs_a_tile_that_passed():
    # 12 columns, wrong past the last multiple of 8: the one tile of 8 before it has a
    # wrong element, so no tile passed: no "only past the last multiple of 8" claim
    found = axis_patterns("dx", _bad(100, 12, range(8, 12), noise_cols=[3]), ("row", "column"))
    assert not [p for p in found if p.noun == "column"], [p.words() for p in found]
    # 20 columns: the second tile of 8 passed, the claim stands
    found = axis_patterns("dx", _bad(100, 20, range(16, 20), noise_cols=[3]),
                          ("row", "column"))
    col = next(p for p in found if p.noun == "column")
    assert col.kind == "remainder" and "only past the last multiple of 8 columns" in \
        col.words()
    # every tile but the first needs a first tile that passed
    assert not [p for p in axis_patterns("dx", _bad(40, 64, range(16, 64), noise_cols=[5]),
                                         ("row", "column")) if p.noun == "column"]
    found = axis_patterns("dx", _bad(40, 64, range(16, 64)), ("row", "column"))
    assert next(p for p in found if p.noun == "column").words().startswith(
        "in every 16-column tile but the first")


def test_fixed_positions_of_each_tile_need_a_tile_whose_other_positions_passed():
    bad = np.zeros((30, 16), dtype=bool)
    bad[3::4] = True  # every 4th row
    bad[np.arange(0, 28, 4), 0] = True  # and one element in each tile's first row
    bad[np.arange(1, 29, 4), 1] = True
    bad[np.arange(2, 30, 4), 2] = True
    found = axis_patterns("dx", torch.from_numpy(bad), ("row", "column"))
    assert not [p for p in found if p.noun == "row" and p.kind == "period"], \
        [p.words() for p in found]
