"""Resources are the harness's problem, not the implementation's: a case the device cannot
hold is `unsupported` with the estimate before the golden is built; a yardstick or golden
that fails is the harness's error (never the implementation's failure, never shrunk); an
out-of-memory error restarts the worker; `fuzz --time` bounds the shrinking too."""

import dataclasses
import math
import re
from types import SimpleNamespace

import pytest
import torch

from bwd_suite.suite import memory, registry, results
from bwd_suite.cli import main
from bwd_suite.suite.commands.fuzz import deadlines
from bwd_suite.suite.fuzz.shrink import failure_of, shrink
from bwd_suite.suite.outcomes import FailureKind, Verdict

SOFTMAX_CI = ["run", "--profile", "ci", "--op", "softmax", "--no-timing", "--repeats", "1",
              "--quiet", "--device", "cpu", "--workers", "0"]
BIAS = ["--profile", "ci", "--case", "causal_conv1d/bias/", "--no-timing", "--repeats", "1",
        "--quiet", "--device", "cpu"]


@pytest.fixture
def no_oom_left(monkeypatch):
    monkeypatch.setattr(memory, "_oom_seen", False)


def test_a_case_beyond_the_free_memory_is_unsupported_with_the_estimate(
        tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(memory, "free_bytes", lambda device, reclaim=False: 0)
    out = tmp_path / "r.parquet"
    assert main([*SOFTMAX_CI, "--impl", "torch_ref", "--output", str(out)]) == 0
    df = results.read_results([out])
    assert len(df) > 0 and (df.verdict == "unsupported").all()
    assert df.reason.str.contains("not enough memory: the case needs about").all()
    assert df.reason.str.contains("GB free").all()


def test_the_estimate_counts_outputs_calls_and_the_float64_golden():
    spec = registry.op("softmax")
    params = dict(spec.params.defaults(), dtype="bfloat16")
    inputs = spec.make_inputs(params, 0, torch.device("cpu"))
    need = memory.case_need(spec, inputs, params, repeats=3)
    dx = inputs.tensors["y"].numel()
    assert need.run == 4 * 2 * dx  # three checked calls and the yardstick's, bf16
    in64 = sum(t.numel() * (8 if t.is_floating_point() else t.element_size())
               for t in inputs.tensors.values() if t is not None)
    assert need.golden == in64 + 2 * 8 * dx
    assert need.on(torch.device("cpu"), torch.device("cpu")) == \
        {torch.device("cpu"): need.run + need.golden}


def _replaced(monkeypatch, op, name, **changes):
    key = (op, name)
    monkeypatch.setitem(registry._IMPLS, key,
                        dataclasses.replace(registry._IMPLS[key], **changes))


def test_a_yardstick_that_fails_is_the_harness_error_not_the_implementations(
        tmp_path, capsys, monkeypatch, no_oom_left):
    def out_of_memory(**kw):
        raise torch.OutOfMemoryError("out of memory (deliberately)")

    _replaced(monkeypatch, "softmax", "torch_ref", fn=out_of_memory)
    out = tmp_path / "r.parquet"
    assert main([*SOFTMAX_CI, "--case", "softmax/masks/", "--impl",
                 "torch_ref,torch_fused_fp32", "--output", str(out)]) == 1
    rows = results.read_rows([out])
    other = [r for r in rows if r.impl == "torch_fused_fp32"]
    own = [r for r in rows if r.impl == "torch_ref"]
    assert other and all(r.verdict is Verdict.ERROR and r.failure_kind is FailureKind.HARNESS
                         for r in other)
    assert all(r.reason.startswith("harness: yardstick torch_ref raised OutOfMemoryError")
               for r in other)
    assert all(failure_of(r) is None for r in other)  # the fuzzer does not shrink it
    # the yardstick's own row is its own error: there it is the implementation under test
    assert own and all(r.failure_kind is FailureKind.EXCEPTION for r in own)
    assert memory.oom_seen()


def test_a_golden_that_fails_is_the_harness_error(tmp_path, capsys, monkeypatch):
    def broken(**kw):
        raise ValueError("golden broken (deliberately)")

    spec = registry.op("softmax")
    monkeypatch.setitem(registry._OPS, "softmax", dataclasses.replace(spec, golden=broken))
    out = tmp_path / "r.parquet"
    assert main([*SOFTMAX_CI, "--case", "softmax/masks/", "--impl", "torch_ref",
                 "--output", str(out)]) == 1
    rows = results.read_rows([out])
    assert rows and all(r.failure_kind is FailureKind.HARNESS for r in rows)
    assert all("float64 golden could not be built: ValueError: golden broken" in r.reason
               for r in rows)
    assert all(failure_of(r) is None for r in rows)


def test_a_worker_restarts_after_running_out_of_memory(tmp_path, capsys):
    out = tmp_path / "r.parquet"
    assert main(["run", *BIAS, "--impl", "causal_conv1d=tests.faults.misbehaving:oom_and_pid",
                 "--output", str(out)]) == 1
    rows = results.read_rows([out])
    assert len(rows) == 8
    pids = [int(re.search(r"pid=(\d+)", r.output).group(1)) for r in rows]
    ooms = [k for k, r in enumerate(rows) if "OutOfMemoryError" in r.reason]
    assert len(ooms) == 2
    for k in ooms:
        if k + 1 < len(rows):  # the next case ran on a fresh worker
            assert pids[k + 1] != pids[k]
    # the other items share workers as usual
    assert len(set(pids)) < len(pids)


def test_shrinking_stops_when_told_and_says_it_is_not_minimal():
    spec = registry.op("softmax")
    params = dict(spec.params.defaults(), rows=64, length=512)
    row = SimpleNamespace(verdict=Verdict.FAIL, failure_kind=FailureKind.MISMATCH,
                          reason="", outputs=[{"name": "dx", "err": 1.0, "allowed": 0.1}])
    calls = []

    def run(p):
        calls.append(p)
        return row  # every variant still fails: only `stop` ends it early

    stops = iter([False, False, True])
    shrunk = shrink(spec, params, row, run, max_tries=50, stop=lambda: next(stops, True))
    assert shrunk.out_of_time and not shrunk.exhausted
    assert len(calls) <= 2


def test_time_bounds_the_whole_fuzz_command():
    args = SimpleNamespace(time=100.0, shrink_time=None)
    assert deadlines(args, 10.0) == (110.0, 85.0)  # a quarter of --time kept for shrinking
    args = SimpleNamespace(time=100.0, shrink_time=30.0)
    assert deadlines(args, 10.0) == (110.0, 80.0)
    args = SimpleNamespace(time=None, shrink_time=30.0)
    assert deadlines(args, 10.0) == (math.inf, math.inf)
