import contextlib
import time
import types

import pytest
import torch

from bwd_suite.suite import timing
from bwd_suite.suite.timing import Timing, quantile, time_call


def _sleeper(seconds):
    return lambda: time.sleep(seconds)


def test_quantile_matches_numpy_linear():
    values = [1.0, 2.0, 4.0, 8.0]
    # numpy.percentile(values, [0, 25, 50, 75, 100]) with the default linear method.
    assert [quantile(values, q) for q in (0, 0.25, 0.5, 0.75, 1)] == [1.0, 1.75, 3.0, 5.0, 8.0]
    assert quantile([7.0], 0.3) == 7.0
    with pytest.raises(ValueError):
        quantile([], 0.5)


def test_stats_on_known_samples():
    t = Timing("perf_counter", tuple(float(i) for i in range(1, 10)), 0, "none")
    assert t.median_s == 5.0
    assert t.iqr_s == 4.0
    assert t.min_s == 1.0


def test_median_is_not_the_mean_and_order_is_kept():
    samples = (5.0, 1.0, 100.0, 2.0, 3.0)
    t = Timing("perf_counter", samples, 0, "none")
    assert t.median_s == 3.0  # the mean would be 22.2
    assert t.samples_s == samples  # order measured, outlier kept


def test_noisy_flag():
    assert not Timing("perf_counter", (1.0, 1.0, 1.0, 1.05, 1.05), 0, "none").noisy
    assert Timing("perf_counter", (1.0, 1.0, 1.5, 2.0, 2.0), 0, "none").noisy
    assert not Timing("perf_counter", (0.0, 0.0, 0.0), 0, "none").noisy  # no division by zero


def test_timing_needs_samples():
    with pytest.raises(ValueError):
        Timing("perf_counter", (), 0, "none")


def test_cpu_sleep_median_and_sample_count():
    t = time_call(_sleeper(0.002), "cpu", warmup=1, repeats=10, max_time_s=5.0)
    assert t.method == "perf_counter"
    assert t.warmup == 1 and t.l2_flush == "none"  # nothing to flush on CPU
    assert t.pacing is None  # nor a GPU to keep ahead of the host
    assert len(t.samples_s) == 10
    assert 0.0019 <= t.median_s < 0.05
    assert t.min_s <= t.median_s


def test_cpu_warmup_calls_are_not_timed():
    calls = []
    t = time_call(lambda: calls.append(1), torch.device("cpu"), warmup=4, repeats=6)
    assert len(calls) == 10
    assert len(t.samples_s) == 6


def test_setup_runs_before_every_call_outside_the_timed_region(monkeypatch):
    # a clock that only setup advances: a sample that included setup would be 1 s
    clock = [0.0]
    monkeypatch.setattr(timing, "time", types.SimpleNamespace(perf_counter=lambda: clock[0]))
    seen = []

    def setup():
        clock[0] += 1.0
        seen.append("setup")

    t = time_call(lambda: seen.append("call"), "cpu", warmup=2, repeats=4, max_time_s=50.0,
                  setup=setup)
    assert seen == ["setup", "call"] * 6
    assert t.samples_s == (0.0,) * 4


def test_cpu_keeps_every_sample_including_outliers():
    durations = iter([0.0, 0.0, 0.001, 0.001, 0.001, 0.03, 0.001])  # 2 warm-up, 5 timed
    t = time_call(lambda: time.sleep(next(durations)), "cpu", warmup=2, repeats=5,
                  max_time_s=5.0)
    assert len(t.samples_s) == 5
    assert max(t.samples_s) >= 0.03 and t.samples_s.index(max(t.samples_s)) == 3
    assert t.median_s < 0.01  # the median, not the mean (~0.007 + overhead)


def test_max_time_limits_samples():
    t = time_call(_sleeper(0.005), "cpu", warmup=0, repeats=1000, max_time_s=0.05)
    assert 3 <= len(t.samples_s) < 30


def test_max_time_keeps_three_samples():
    # The first call fits the budget (widely: CI machines stretch sleeps), two already
    # overrun it: a third is still taken, and no fourth.
    durations = iter([0.001, 0.03, 0.03, 0.03])
    t = time_call(lambda: time.sleep(next(durations)), "cpu", warmup=0, repeats=10,
                  max_time_s=0.02)
    assert len(t.samples_s) == 3


def test_one_sample_when_a_call_overruns_the_budget():
    t = time_call(_sleeper(0.03), "cpu", warmup=0, repeats=10, max_time_s=0.01)
    assert len(t.samples_s) == 1


def test_repeats_below_three_is_the_bound():
    # The budget is overrun by the second call, the first fits it with a wide margin (a
    # loaded 2-core CI machine once stretched a 10 ms sleep to 22 ms): both are kept.
    durations = iter([0.001, 0.25])
    t = time_call(lambda: time.sleep(next(durations)), "cpu", warmup=0, repeats=2,
                  max_time_s=0.2)
    assert len(t.samples_s) == 2


@pytest.mark.parametrize("kwargs", [dict(repeats=0), dict(warmup=-1), dict(max_time_s=0),
                                    dict(warmup_s=-0.001)])
def test_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        time_call(lambda: None, "cpu", **kwargs)


def test_flush_kinds_are_checked():
    with pytest.raises(ValueError, match="l2_flush"):
        time_call(lambda: None, "cpu", l2_flush="zero")
    with pytest.raises(ValueError, match="l2_flush"):
        Timing("perf_counter", (1.0,), 0, True)


def test_clean_flush_reads_the_buffer_and_dirty_flush_writes_it():
    # the passes themselves, on CPU tensors: clean leaves the buffer as it was (no dirty
    # lines) and sums it into the sink; dirty zeroes it
    buf = torch.arange(1, 1001, dtype=torch.int32)
    sink = torch.zeros((), dtype=torch.int64)
    timing.flush_l2(buf, "clean", sink)
    assert int(sink) == 1000 * 1001 // 2
    assert torch.equal(buf, torch.arange(1, 1001, dtype=torch.int32))
    timing.flush_l2(buf, "none", sink)
    assert torch.equal(buf, torch.arange(1, 1001, dtype=torch.int32))
    timing.flush_l2(buf, "dirty")
    assert not buf.any()
    with pytest.raises(ValueError, match="l2_flush"):
        timing.flush_l2(buf, "read")


def test_cli_constants_are_the_timing_ones():
    from bwd_suite.suite import cli

    assert cli.L2_FLUSH_MODES == timing.L2_FLUSH_MODES
    assert cli.DEFAULT_WARMUP_MS / 1e3 == timing.DEFAULT_WARMUP_S


def test_unknown_device_type():
    with pytest.raises(ValueError, match="device type"):
        time_call(lambda: None, "meta")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_events_time_the_kernel():
    x = torch.randn(64 * 2**20, device="cuda")  # 256 MiB
    y = torch.empty_like(x)
    t = time_call(lambda: torch.mul(x, 2.0, out=y), "cuda", warmup=2, repeats=10)
    assert t.method == "cuda_events" and t.l2_flush == "clean" and t.pacing == "hold"
    assert len(t.samples_s) == 10
    # 512 MiB read + written: a median under 512 MiB / 10 TB/s means fn() was not timed.
    assert 512 * 2**20 / t.median_s < 10e12
    assert 0 < t.median_s < 0.05
    buf = timing._flush_buffers[torch.cuda.current_device()]
    assert buf.numel() * buf.element_size() == timing.L2_FLUSH_BYTES


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_flush_buffer_is_cached_and_optional():
    time_call(lambda: None, "cuda", warmup=0, repeats=3)
    buf = timing._flush_buffers[torch.cuda.current_device()]
    time_call(lambda: None, "cuda", warmup=0, repeats=3)
    assert timing._flush_buffers[torch.cuda.current_device()] is buf
    t = time_call(lambda: None, torch.device("cuda", torch.cuda.current_device()), warmup=1,
                  repeats=3, l2_flush="none")
    assert t.l2_flush == "none"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("kind", ["clean", "dirty"])
def test_cuda_flush_makes_reads_cold(kind):
    # An 8 MiB read fits in L2: warm samples are faster than flushed ones.
    x = torch.randn(2 * 2**20, device="cuda")
    warm = time_call(lambda: x.sum(), "cuda", repeats=50, l2_flush="none")
    cold = time_call(lambda: x.sum(), "cuda", repeats=50, l2_flush=kind)
    assert cold.median_s > warm.median_s
    assert cold.l2_flush == kind


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_clean_flush_leaves_the_buffer_and_no_dirty_lines():
    # The clean flush only reads: its buffer keeps a pattern written into it. A 64 MiB copy
    # after the dirty flush also writes back the flush's lines, after the clean one it does
    # not (an H200: 3.6 us of a 48 us copy of 201 MB); a margin of 2% is asked here.
    time_call(lambda: None, "cuda", warmup=0, repeats=3, l2_flush="clean")
    buf = timing._flush_buffers[torch.cuda.current_device()]
    pattern = torch.arange(buf.numel(), dtype=buf.dtype, device=buf.device)
    buf.copy_(pattern)
    src = torch.randn(8 * 2**20, device="cuda")
    dst = torch.empty_like(src)
    clean = time_call(lambda: dst.copy_(src), "cuda", repeats=30, l2_flush="clean")
    assert torch.equal(buf, pattern)
    dirty = time_call(lambda: dst.copy_(src), "cuda", repeats=30, l2_flush="dirty")
    assert not buf.any()
    assert clean.median_s < 0.98 * dirty.median_s, (clean.median_s, dirty.median_s)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_times_gpu_work_not_launch_gaps():
    # 100 tiny kernels: launching them takes the host far longer than the GPU runs them.
    x = torch.ones(1024, device="cuda")
    fn = lambda: [x.add_(1.0) for _ in range(100)]  # noqa: E731
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(10):
        fn()
    host_s = (time.perf_counter() - t0) / 10
    torch.cuda.synchronize()
    for flush in ("none", "clean", "dirty"):
        t = time_call(fn, "cuda", l2_flush=flush)
        assert t.median_s < 0.7 * host_s, (flush, t.median_s, host_s)


def test_cpu_warmup_is_counted_not_timed():
    # warmup_s is for the GPU's clock; on CPU the warm-up is the count asked for.
    calls = []
    t = time_call(lambda: calls.append(1), "cpu", warmup=2, warmup_s=10.0, repeats=4)
    assert t.warmup == 2 and len(calls) == 6


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_warmup_lasts_warmup_s():
    x = torch.randn(64 * 2**20, device="cuda")  # 256 MiB each way: ~0.1 ms a call
    calls = []

    def fn():
        calls.append(1)
        x.mul_(1.0)

    t = time_call(fn, "cuda", warmup=2, warmup_s=0.02, repeats=10, l2_flush="none")
    assert len(calls) == t.warmup + len(t.samples_s)
    # The warm-up ran for about warmup_s (each call as long as a sample), not 2 calls.
    assert 0.5 * 0.02 <= t.warmup * t.median_s <= 3 * 0.02, (t.warmup, t.median_s)
    for warmup, warmup_s, made in ((0, 0.02, 0), (3, 0.0, 3)):  # none at all; the count only
        calls.clear()
        t = time_call(fn, "cuda", warmup=warmup, warmup_s=warmup_s, repeats=5, l2_flush="none")
        assert t.warmup == made and len(calls) == made + len(t.samples_s)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_hold_outrun_by_the_host_takes_the_samples_again(monkeypatch):
    # A fn whose host time (1 ms) dwarfs its GPU time. Behind the hold sized from the
    # warm-up every sample is taken once; behind a hold of 1 us the host outruns it, and
    # the samples are taken again behind a longer one.
    x = torch.ones(16, device="cuda")
    calls = []

    def fn():
        calls.append(1)
        time.sleep(1e-3)
        x.add_(1.0)

    t = time_call(fn, "cuda", warmup=2, warmup_s=0, repeats=5, l2_flush="none")
    assert len(calls) == 2 + 5 and t.median_s < 0.5e-3 and t.pacing == "hold"
    monkeypatch.setattr(timing, "_HOLD_MARGIN", 0)
    monkeypatch.setattr(timing, "_HOLD_BASE_S", 1e-6)
    calls.clear()
    t = time_call(fn, "cuda", warmup=2, warmup_s=0, repeats=5, l2_flush="none")
    # the retry's hold, twice the ~5 ms the host just took, covers it
    assert len(calls) == 2 + 5 + 5 and len(t.samples_s) == 5 and t.pacing == "hold"
    assert t.median_s < 0.5e-3
    # a retry that would need a hold over the cap is not made: the samples say "outrun"
    monkeypatch.setattr(timing, "_MAX_HOLD_S", 2e-3)
    calls.clear()
    t = time_call(fn, "cuda", warmup=2, warmup_s=0, repeats=5, l2_flush="none")
    assert len(calls) == 2 + 5 and len(t.samples_s) == 5 and t.pacing == "outrun"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_fn_that_synchronizes_is_not_held_twice():
    # A fn that synchronizes waits for the hold: its samples are taken once, not again
    # behind a longer hold it would wait for too, and say so.
    x = torch.ones(16, device="cuda")
    calls = []

    def fn():
        calls.append(1)
        x.add_(1.0)
        torch.cuda.synchronize()

    t0 = time.perf_counter()
    t = time_call(fn, "cuda", warmup=2, warmup_s=0, repeats=5, l2_flush="none")
    assert len(calls) == 2 + 5 and t.pacing == "outrun"
    assert time.perf_counter() - t0 < 0.5  # one hold (<= 0.25 s), not two


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_max_time_limits_samples():
    a = torch.randn(4096, 4096, device="cuda")
    fn = lambda: [a @ a for _ in range(20)]  # noqa: E731  tens of ms
    for warmup in (2, 0):  # without warm-up the first sample is the estimate
        t0 = time.perf_counter()
        t = time_call(fn, "cuda", warmup=warmup, repeats=1000, max_time_s=0.2)
        assert 3 <= len(t.samples_s) < 1000
        assert time.perf_counter() - t0 < 1.0 + 3 * t.median_s


# -- the hold's decisions on CPU, against a fake GPU and a fake clock ----------------------

class _FakeGpu:
    """Just enough of torch.cuda for _time_cuda's pacing, on a clock of its own (the
    module's time.perf_counter is replaced by `now`, so nothing depends on this machine's
    load): a spin (`_sleep`) that ends `cycles / RATE` seconds after it is enqueued, events
    that complete when every spin before them has ended, a synchronize that waits for
    that. A fn takes host time by `host(seconds)`."""
    RATE = 1e9  # spin cycles a second

    def __init__(self):
        self.t = 0.0
        self.spin_end = 0.0
        self.holds_s = []  # each spin's length

    def now(self):
        return self.t

    def host(self, seconds):
        self.t += seconds

    def sleep(self, cycles):
        self.holds_s.append(cycles / self.RATE)
        self.spin_end = max(self.spin_end, self.t) + cycles / self.RATE

    def synchronize(self, *_):
        self.t = max(self.t, self.spin_end)

    def event_class(self):
        gpu = self

        class Event:
            def __init__(self, enable_timing=False):
                self.t = self.done = None

            def record(self):
                self.t = gpu.t
                self.done = max(gpu.t, gpu.spin_end)

            def query(self):
                return gpu.t >= self.done

            def elapsed_time(self, other):
                return (other.done - self.done) * 1e3
        return Event


@pytest.fixture
def fake_gpu(monkeypatch):
    gpu = _FakeGpu()
    monkeypatch.setattr(torch.cuda, "Event", gpu.event_class())
    monkeypatch.setattr(torch.cuda, "synchronize", gpu.synchronize)
    monkeypatch.setattr(torch.cuda, "_sleep", gpu.sleep, raising=False)
    monkeypatch.setattr(torch.cuda, "device", lambda index: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(timing, "spin_rate", lambda: _FakeGpu.RATE)
    monkeypatch.setattr(timing, "time", types.SimpleNamespace(perf_counter=gpu.now))
    return gpu


def _time_fake(fn, repeats=5):
    return timing._time_cuda(fn, torch.device("cuda", 0), warmup=2, warmup_s=0.0,
                             repeats=repeats, max_time_s=5.0, l2_flush="none")


def _host_bound(gpu, calls, seconds=1e-3):
    def fn():
        calls.append(1)
        gpu.host(seconds)
    return fn


def test_fake_gpu_hold_covers_a_host_bound_fn(fake_gpu):
    calls = []
    t = _time_fake(_host_bound(fake_gpu, calls))
    assert len(calls) == 2 + 5 and len(t.samples_s) == 5 and t.pacing == "hold"
    assert fake_gpu.holds_s == [pytest.approx(4 * 5 * 1e-3 + 1e-3)]


def test_fake_gpu_outrun_hold_is_retried_behind_twice_the_enqueue_time(fake_gpu, monkeypatch):
    monkeypatch.setattr(timing, "_HOLD_MARGIN", 0)
    monkeypatch.setattr(timing, "_HOLD_BASE_S", 1e-6)
    calls = []
    t = _time_fake(_host_bound(fake_gpu, calls))
    assert len(calls) == 2 + 5 + 5 and len(t.samples_s) == 5 and t.pacing == "hold"
    # twice the 5 ms the host took to enqueue 5 calls of 1 ms (was 4 x the first hold)
    assert fake_gpu.holds_s == [pytest.approx(1e-6), pytest.approx(2 * 5e-3 + 1e-6)]


def test_fake_gpu_retry_over_the_cap_is_not_made(fake_gpu, monkeypatch):
    monkeypatch.setattr(timing, "_HOLD_MARGIN", 0)
    monkeypatch.setattr(timing, "_HOLD_BASE_S", 1e-6)
    monkeypatch.setattr(timing, "_MAX_HOLD_S", 2e-3)
    calls = []
    t = _time_fake(_host_bound(fake_gpu, calls))
    assert len(calls) == 2 + 5 and t.pacing == "outrun" and len(fake_gpu.holds_s) == 1


def test_fake_gpu_fn_that_synchronizes_is_held_once(fake_gpu):
    calls = []

    def fn():  # waits for the GPU, so for any hold
        calls.append(1)
        fake_gpu.host(1e-4)
        fake_gpu.synchronize()

    t = _time_fake(fn)
    assert len(calls) == 2 + 5 and t.pacing == "outrun" and len(fake_gpu.holds_s) == 1


def test_fake_gpu_wall_time_waits_for_the_device_and_leaves_setup_out(fake_gpu):
    calls = []

    def setup():  # host time and device work of its own, neither in the samples
        fake_gpu.host(1.0)
        fake_gpu.sleep(int(0.5 * _FakeGpu.RATE))

    def fn():
        calls.append(1)
        fake_gpu.host(1e-4)  # the launch
        fake_gpu.sleep(int(2e-3 * _FakeGpu.RATE))  # the kernel

    assert timing.wall_time(fn, "cuda:0", repeats=50, setup=setup) == pytest.approx(2.1e-3)
    assert len(calls) == timing.WALL_MAX_SAMPLES  # capped


def test_cpu_wall_time_is_the_median_of_host_times(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(timing, "time", types.SimpleNamespace(perf_counter=lambda: clock[0]))
    lengths = iter([5.0, 1.0, 3.0])

    def fn():
        clock[0] += next(lengths)

    assert timing.wall_time(fn, "cpu", repeats=3, setup=lambda: clock.__setitem__(
        0, clock[0] + 100.0)) == 3.0
    with pytest.raises(ValueError):
        timing.wall_time(fn, "cpu", repeats=0)
    with pytest.raises(ValueError, match="device type"):
        timing.wall_time(fn, "meta")


# -- host load: measured around the samples alone (suite/host_load.py) ---------------------

def _fake_meter(monkeypatch, calls, share):
    """Replace the meter with one reporting `share`; returns how many calls had been made
    when it was entered and left."""
    seen = {}

    class Meter:
        def __enter__(self):
            seen["enter"] = len(calls)
            return self

        def __exit__(self, *exc):
            seen["exit"] = len(calls)
            self.share = share

    monkeypatch.setattr(timing, "HostLoadMeter", Meter)
    return seen


def test_cpu_host_load_is_measured_around_the_samples_not_the_warmup(monkeypatch):
    calls = []
    seen = _fake_meter(monkeypatch, calls, 0.42)
    t = time_call(lambda: calls.append(1), "cpu", warmup=3, repeats=5, max_time_s=50.0)
    assert t.host_load == 0.42
    assert seen == {"enter": 3, "exit": 3 + 5}


def test_fake_gpu_host_load_is_measured_around_the_samples(fake_gpu, monkeypatch):
    calls = []
    seen = _fake_meter(monkeypatch, calls, 0.7)
    t = _time_fake(_host_bound(fake_gpu, calls))
    assert t.host_load == 0.7 and seen == {"enter": 2, "exit": 2 + 5}


def test_host_load_is_unknown_by_default_and_compare_knows_the_cpu_method():
    from bwd_suite.suite import regression

    assert Timing("perf_counter", (1.0,), 0, "none").host_load is None
    # compare holds CPU timings alone to the load rule, by this method (it keeps a copy)
    assert timing.CPU_METHOD == regression.CPU_TIMING_METHOD
    assert time_call(lambda: None, "cpu", warmup=0, repeats=3).method == timing.CPU_METHOD


def test_the_runner_stores_the_host_load(monkeypatch):
    from types import MappingProxyType

    from bwd_suite.kernels.softmax.torch_ref import torch_ref
    from bwd_suite.suite import registry, runner
    from bwd_suite.suite.cases import Case
    from bwd_suite.suite.registry import Implementation
    from bwd_suite.suite.roofline import Ceilings
    from bwd_suite.suite.rows import ResultRow

    spec = registry.op("softmax")
    case = Case(op="softmax", group="t", id="softmax/t/x", tags=frozenset({"ci"}),
                params=MappingProxyType(dict(spec.params.defaults(), rows=2, length=8)),
                seed=1, file="<test>")
    cpu = torch.device("cpu")
    ctx = runner.CaseContext(spec, case, runner.RunOptions(device=cpu, golden_device=cpu))
    monkeypatch.setattr(runner, "time_call", lambda call, device, setup, **how: Timing(
        method="perf_counter", samples_s=(1e-3, 2e-3, 3e-3), warmup=1, l2_flush="none",
        host_load=0.37))
    monkeypatch.setattr(runner, "same_bytes_copy_s", lambda *a, **k: None)
    row = ResultRow(bytes=100, flops=10)
    runner._time(row, spec, Implementation(op="softmax", name="r", fn=torch_ref,
                                           kind="native"), ctx,
                 Ceilings(device_name="x", copy_gbps=None, copy_source="none",
                          peak_tflops=None))
    assert row.host_load == 0.37 and row.time_median_s == 2e-3
