"""A sticky CUDA fault (the context lost) blames the item that hit it: every later item of
the process is an error naming that item, not a failure of its own. Simulated on the CPU
by making the suite's probe of the CUDA context fail."""

import subprocess
import sys
from pathlib import Path

import pytest

from bwd_suite.suite import cuda_fault
from bwd_suite.suite.runner import RunOptions, run_case
from tests.harness.test_verdicts import CEIL, CPU, SPEC, correct, impl, make_case

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def probe(monkeypatch):
    state = {"lost": False}
    monkeypatch.setattr(cuda_fault, "_context_lost", lambda: state["lost"])
    cuda_fault.reset()
    yield state
    cuda_fault.reset()


def _boom(state):
    def fn(**kw):
        state["lost"] = True
        raise RuntimeError("CUDA error: misaligned address")
    return fn


def test_later_items_and_cases_name_the_item_that_lost_the_context(probe):
    opts = RunOptions(device=CPU, golden_device=CPU, repeats=1, timing=False)
    first = make_case()
    rows = list(run_case(SPEC, first, [impl(_boom(probe), "boom"), impl(correct, "ok")],
                         opts, None, CEIL))
    assert rows[0].verdict == "error"
    assert "misaligned address" in rows[0].reason and "later items" in rows[0].reason
    assert rows[1].verdict == "error"
    assert rows[1].reason.startswith("not run") and f"{first.id} [boom]" in rows[1].reason

    unsupported = impl(correct, "w4", supports=lambda p: "width > 4" if p["width"] > 4 else None)
    rows = list(run_case(SPEC, make_case(width=5), [impl(correct, "ok"), unsupported],
                         opts, None, CEIL))
    assert rows[0].verdict == "error" and f"{first.id} [boom]" in rows[0].reason
    assert rows[1].verdict == "unsupported"


def test_an_error_that_leaves_the_context_working_blames_nothing(probe):
    def raises(**kw):
        raise RuntimeError("CUDA error: misaligned address")

    opts = RunOptions(device=CPU, golden_device=CPU, repeats=1, timing=False)
    rows = list(run_case(SPEC, make_case(), [impl(raises, "raises"), impl(correct, "ok")],
                         opts, None, CEIL))
    assert rows[0].verdict == "error" and "later items" not in rows[0].reason
    assert rows[1].verdict == "pass", rows[1].reason
    assert cuda_fault.lost_at() is None


def test_pytest_items_after_the_fault_fail_naming_it():
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         "-rf", "cases/causal_conv1d/basic.toml", "--suite-op", "causal_conv1d",
         "--suite-impl", "tests.helpers:loses_cuda_context,torch_ref", "-k", "bias/",
         "--suite-device", "cpu"],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    out = r.stdout
    assert r.returncode == 1, out[-2000:]
    lines = out.split("= FAILURES =", 1)[1].split("short test summary", 1)[0].splitlines()
    # each failure: a "___ id ___" header, then the verdict line
    msgs = [(lines[i].strip("_ "), lines[i + 1]) for i in range(len(lines) - 1)
            if lines[i].startswith("_") and lines[i].rstrip().endswith("_")]
    assert len(msgs) == 16, out[-2000:]  # 8 bias cases x 2 implementations, all failed
    (culprit, first), rest = msgs[0], msgs[1:]
    assert "loses_cuda_context" in culprit
    assert "misaligned address" in first and "later items" in first, first
    case = culprit.split("[")[0]
    for item, msg in rest:
        assert msg.startswith("not run") and f"{case} [tests.helpers:loses_cuda_context]" in msg, (item, msg)
