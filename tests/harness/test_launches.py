"""Kernel launches per call (suite/launches.py): the counting rule on fake profiler
events, the never-fatal contract, and on a GPU the count of real calls."""

import dataclasses
from types import MappingProxyType, SimpleNamespace

import pytest
import torch
from torch.autograd import DeviceType

from bwd_suite.kernels.adamw.torch_ref import torch_ref
from bwd_suite.suite import launches, registry, runner
from bwd_suite.suite.cases import Case
from bwd_suite.suite.registry import Implementation
from bwd_suite.suite.roofline import Ceilings
from bwd_suite.suite.rows import ResultRow
from bwd_suite.suite.timing import Timing

CUDA, CPU = DeviceType.CUDA, DeviceType.CPU


def ev(name, device=CUDA, activity=None):
    return SimpleNamespace(name=name, device_type=device, activity_type=activity)


FAKE = [
    ev("aten::add", CPU),  # a host op
    ev("cudaLaunchKernel", CPU, "cuda_runtime"),  # the launch call, host side
    ev("void at::native::vectorized_elementwise_kernel<4>", activity="kernel"),
    ev("void at::native::reduce_kernel<512, 1>", activity="Kernel"),  # legacy spelling
    ev("Memcpy DtoD (Device -> Device)", activity="gpu_memcpy"),
    ev("Memset (Device)", activity="gpu_memset"),
    ev("my_region", activity="gpu_user_annotation"),  # a record_function on the GPU
    ev("triton_poi_fused_add_0"),  # no activity type: judged by its name
    ev("Memcpy HtoD (Pageable -> Device)"),
]


def test_only_kernels_on_the_device_count():
    assert [launches.kind(e) for e in FAKE] == [
        None, None, "kernel", "kernel", "gpu_memcpy", "gpu_memset", None, "kernel",
        "gpu_memcpy"]
    assert launches.count_kernels(FAKE) == 3
    assert launches.count_kernels([]) == 0


def test_count_runs_setup_first_and_counts_the_profile(monkeypatch):
    order = []

    def profiled(fn, device):
        assert device == torch.device("cuda:1")
        fn()
        return FAKE

    monkeypatch.setattr(launches, "_device_events", profiled)
    got = launches.count_launches(lambda: order.append("call"), "cuda:1",
                                  setup=lambda: order.append("setup"))
    assert got == 3 and order == ["setup", "call"]


def test_a_count_that_fails_is_none(monkeypatch):
    def broken(fn, device):
        raise RuntimeError("CUPTI_ERROR_NOT_INITIALIZED")

    monkeypatch.setattr(launches, "_device_events", broken)
    assert launches.count_launches(lambda: None, "cuda") is None
    assert launches.count_launches(lambda: None, "cpu") is None  # off CUDA: not counted


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_one_add_is_one_launch_and_two_are_two():
    a = torch.randn(1 << 16, device="cuda")
    b = torch.randn(1 << 16, device="cuda")
    torch.add(a, b)  # module loading stays out of the counted calls
    torch.cuda.synchronize()
    assert launches.count_launches(lambda: torch.add(a, b), "cuda") == 1
    assert launches.count_launches(lambda: (torch.add(a, b), torch.add(b, a)), "cuda") == 2


def test_the_runner_stores_wall_time_and_launches_of_a_cuda_item(monkeypatch):
    """suite.runner._time on CUDA, its clocks and profiler faked: the wall time in ms over
    as many calls as the timing kept, the launches, both given the op's setup."""
    spec = registry.op("adamw")
    case = Case(op="adamw", group="t", id="adamw/t/x", tags=frozenset({"ci"}),
                params=MappingProxyType(dict(spec.params.defaults(), sizes=[5])), seed=1,
                file="<test>")
    cpu = torch.device("cpu")
    ctx = runner.CaseContext(spec, case, runner.RunOptions(device=cpu, golden_device=cpu))
    ctx.opts = dataclasses.replace(ctx.opts, device=torch.device("cuda", 0))
    seen = {}
    monkeypatch.setattr(runner, "time_call", lambda call, device, setup, **how: Timing(
        method="cuda_events", samples_s=(1e-3, 2e-3, 3e-3), warmup=1, l2_flush="clean"))
    monkeypatch.setattr(runner, "same_bytes_copy_s", lambda *a, **k: None)

    def wall(call, device, setup, repeats):
        seen["wall"] = (setup is not None, repeats)
        return 4e-3

    def count(call, device, setup):
        seen["count"] = setup is not None
        return 7

    monkeypatch.setattr(runner, "wall_time", wall)
    monkeypatch.setattr(runner, "count_launches", count)
    row = ResultRow(bytes=100, flops=10)
    runner._time(row, spec, Implementation(op="adamw", name="r", fn=torch_ref,
                                           kind="native"), ctx,
                 Ceilings(device_name="x", copy_gbps=None, copy_source="none",
                          peak_tflops=None))
    assert row.time_median_s == 2e-3 and row.wall_median_ms == 4.0 and row.launches == 7
    assert seen == {"wall": (True, 3), "count": True}
