"""The compute-roofline and memory-ledger columns of a row as the runner fills them: the
case dtype's compute ceiling (the op's dtype_param), and the op's memory bounds as JSON,
never fatal."""

import dataclasses
import json
from types import MappingProxyType

import pytest
import torch

from bwd_suite.kernels.softmax.torch_ref import torch_ref
from bwd_suite.suite import registry, runner
from bwd_suite.suite.cases import Case
from bwd_suite.suite.registry import Implementation
from bwd_suite.suite.roofline import Ceilings
from bwd_suite.suite.rows import ResultRow
from bwd_suite.suite.timing import Timing

CPU = torch.device("cpu")
# synthetic ceilings: an H100's measured peaks (the device here is a CPU; _time is given them)
H100 = Ceilings("NVIDIA H100", copy_gbps=3000.0, copy_source="measured", peak_tflops=67.0,
                gemm_tflops={"bfloat16": 778.0, "float16": 755.0, "float32": 51.0},
                gemm_source="measured")


def softmax(memory_bounds=None, **params):
    spec = registry.op("softmax")
    if memory_bounds is not None:
        spec = dataclasses.replace(spec, memory_bounds=memory_bounds)
    case = Case(op="softmax", group="t", id="softmax/t/x", tags=frozenset({"ci"}),
                params=MappingProxyType(dict(spec.params.defaults(), rows=2, length=8,
                                             **params)), seed=1, file="<test>")
    return spec, case


def timed_row(monkeypatch, spec, case, ceilings=H100, median_s=2e-6, flops=10**9) -> ResultRow:
    ctx = runner.CaseContext(spec, case, runner.RunOptions(device=CPU, golden_device=CPU))
    monkeypatch.setattr(runner, "time_call", lambda call, device, setup, **how: Timing(
        method="perf_counter", samples_s=(median_s,) * 3, warmup=1, l2_flush="none"))
    monkeypatch.setattr(runner, "same_bytes_copy_s", lambda *a, **k: None)
    row = ResultRow(bytes=10**6, flops=flops)
    runner._time(row, spec, Implementation(op="softmax", name="r", fn=torch_ref,
                                           kind="native"), ctx, ceilings)
    return row


@pytest.mark.parametrize("dtype, peak", [("bfloat16", 778.0), ("float16", 755.0),
                                         ("float32", 51.0)])
def test_the_runner_judges_a_row_by_its_dtypes_peak(monkeypatch, dtype, peak):
    spec, case = softmax(dtype=dtype)
    row = timed_row(monkeypatch, spec, case)  # 1e9 flops in 2 us: 500 TFLOP/s, 1000 flop/B
    assert row.tflops == pytest.approx(500.0)
    assert row.peak_tflops == peak and row.frac_peak_flops == pytest.approx(500.0 / peak)
    assert row.bound == "compute" and row.frac_copy_bw == pytest.approx(500 / 3000)


def test_a_memory_bound_row_keeps_its_copy_fraction(monkeypatch):
    spec, case = softmax(dtype="bfloat16")
    row = timed_row(monkeypatch, spec, case, flops=4 * 10**6)  # 4 flop/B: far below 259
    assert row.bound == "memory" and row.frac_copy_bw == pytest.approx(500 / 3000)
    assert row.tflops == pytest.approx(2.0) and row.peak_tflops == 778.0


def test_a_cpu_run_has_tflops_and_no_peak(monkeypatch):
    spec, case = softmax(dtype="bfloat16")
    cpu = Ceilings("x86_64", copy_gbps=20.0, copy_source="measured", peak_tflops=None)
    row = timed_row(monkeypatch, spec, case, ceilings=cpu)
    assert row.tflops == pytest.approx(500.0)
    assert (row.peak_tflops, row.frac_peak_flops, row.bound) == (None, None, None)


def test_the_runner_stores_the_ops_memory_bounds(monkeypatch):
    def bounds(p):
        return {"materialised": 3 * p["rows"] * p["length"] * 4 + p["rows"] ** 2,
                "fused": 2.5 * p["rows"]}

    spec, case = softmax(memory_bounds=bounds)
    row = timed_row(monkeypatch, spec, case)
    assert row.memory_bounds_json == '{"materialised": 196, "fused": 5.0}'
    assert list(json.loads(row.memory_bounds_json)) == ["materialised", "fused"]  # op's order
    assert row.saved_bytes is None  # filled by the implementation's forward, not here
    spec, case = softmax()  # an op that declares none
    assert timed_row(monkeypatch, spec, case).memory_bounds_json is None


def test_memory_bounds_never_lose_the_item():
    spec, case = softmax()
    assert spec.memory_bounds_json(case.params) is None

    def check(fn, message):
        s = dataclasses.replace(spec, memory_bounds=fn)
        out = json.loads(s.memory_bounds_json(case.params))
        assert list(out) == ["error"] and message in out["error"], out

    check(lambda p: p["seq_q"], "KeyError: 'seq_q'")
    check(lambda p: [1, 2], "TypeError: memory_bounds gave a list, not a mapping")
    check(lambda p: {"fused": -1}, "bound 'fused' is -1, not a byte count")
    check(lambda p: {"fused": float("nan")}, "bound 'fused' is nan")
    check(lambda p: {"fused": "3 GB"}, "bound 'fused' is '3 GB'")
    check(lambda p: {"fused": True}, "bound 'fused' is True")
    ok = dataclasses.replace(spec, memory_bounds=lambda p: {"fused": torch.tensor(12)})
    assert ok.memory_bounds_json(case.params) == '{"fused": 12}'
    with pytest.raises(ValueError, match="memory_bounds must be a function"):
        dataclasses.replace(spec, memory_bounds={"fused": 1})
