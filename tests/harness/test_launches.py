"""Kernel launches per call (suite/launches.py): the counting rule on fake profiler
events, the never-fatal contract, and on a GPU the count of real calls."""

from types import SimpleNamespace

import pytest
import torch
from torch.autograd import DeviceType

from suite import launches

CUDA, CPU = DeviceType.CUDA, DeviceType.CPU


def ev(name, device=CUDA, activity=None):
    return SimpleNamespace(name=name, device_type=device, activity_type=activity)


FAKE = [
    ev("aten::add", CPU),  # a host op
    ev("cudaLaunchKernel", CPU, "cuda_runtime"),  # the launch call, host side
    ev("void at::native::vectorized_elementwise_kernel<4>", activity="kernel"),
    ev("void at::native::reduce_kernel<512, 1>", activity="kernel"),
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
