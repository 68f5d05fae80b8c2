import json

import pytest
import torch

from bwd_suite.suite import roofline as rl
from bwd_suite.suite.roofline import Ceilings, roofline


H200 = Ceilings("NVIDIA H200", copy_gbps=4000.0, copy_source="measured 2026-01-01",
                peak_tflops=67.0)


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("BWD_SUITE_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_roofline_arithmetic():
    r = roofline(bytes=2_000_000_000, flops=500_000_000, median_s=0.001, ceilings=H200)
    assert r.gbps == pytest.approx(2000.0)
    assert r.frac_copy_bw == pytest.approx(0.5)
    assert r.arith_intensity == pytest.approx(0.25)
    assert H200.balance == pytest.approx(67e12 / 4000e9)  # 16.75 flops/byte
    assert r.bound == "memory"


def test_roofline_compute_bound():
    r = roofline(bytes=1000, flops=100_000, median_s=1e-6, ceilings=H200)
    assert r.arith_intensity == 100.0
    assert r.bound == "compute"


def test_roofline_unknowns():
    unknown_bw = Ceilings("NVIDIA H200", None, "none", 67.0)
    r = roofline(bytes=1000, flops=10, median_s=1e-6, ceilings=unknown_bw)
    assert r.gbps == pytest.approx(1.0)
    assert r.frac_copy_bw is None and r.bound is None
    r = roofline(bytes=1000, flops=10, median_s=None, ceilings=H200)
    assert r.gbps is None and r.frac_copy_bw is None and r.bound == "memory"
    r = roofline(bytes=1000, flops=10, median_s=1e-6, ceilings=Ceilings("cpu", 10.0, "x", None))
    assert r.frac_copy_bw == pytest.approx(0.1) and r.bound is None
    assert roofline(0, 0, 1.0, H200).arith_intensity is None


def test_datasheet_lookup():
    assert rl.datasheet("NVIDIA H200").copy_gbps == 4800
    assert rl.datasheet("NVIDIA H100 80GB HBM3").fp32_tflops == 67
    assert rl.datasheet("NVIDIA A100-SXM4-80GB").bf16_dense_tflops == 312
    assert rl.datasheet("x86_64") is None


def test_calibration_path(cache_dir, monkeypatch):
    assert rl.calibration_path() == cache_dir / "calibration.json"
    monkeypatch.delenv("BWD_SUITE_CACHE")
    assert rl.calibration_path().parts[-3:] == (".cache", "bwd-suite", "calibration.json")


def test_calibration_round_trip(cache_dir, monkeypatch):
    monkeypatch.setattr(rl, "device_name", lambda device: "NVIDIA H200")
    rl.save_calibration("other device", 12.5)
    path = rl.save_calibration("NVIDIA H200", 4321.0)
    data = json.loads(path.read_text())
    assert set(data) == {"other device", "NVIDIA H200"}
    assert data["NVIDIA H200"]["copy_gbps"] == 4321.0
    assert data["NVIDIA H200"]["torch"] == torch.__version__
    assert list(cache_dir.iterdir()) == [path]  # no temporary file left behind

    c = rl.load_ceilings(torch.device("cpu"))
    assert c.device_name == "NVIDIA H200"
    assert c.copy_gbps == 4321.0
    assert c.copy_source == "measured " + data["NVIDIA H200"]["measured_at"][:10]
    assert c.peak_tflops is None  # CPU: no datasheet peak


def test_datasheet_copy_fallback(monkeypatch):
    monkeypatch.setattr(rl, "device_name", lambda device: "NVIDIA H200")
    c = rl.load_ceilings(torch.device("cuda", 0))
    assert (c.copy_gbps, c.copy_source, c.peak_tflops) == (None, "none", 67)
    c = rl.load_ceilings(torch.device("cuda", 0), datasheet_copy=True)
    assert (c.copy_gbps, c.copy_source) == (4800, "datasheet")


def test_uncalibrated_and_damaged_cache(cache_dir):
    c = rl.load_ceilings("cpu")
    assert c.copy_gbps is None and c.copy_source == "none" and c.peak_tflops is None
    cache_dir.mkdir()
    (cache_dir / "calibration.json").write_text("{not json")
    assert rl.load_ceilings("cpu").copy_source == "none"
    rl.save_calibration(rl.device_name("cpu"), 7.0)  # overwrites the damaged file
    assert rl.load_ceilings("cpu").copy_gbps == 7.0


def test_measure_copy_bandwidth_cpu():
    gbps = rl.measure_copy_bandwidth("cpu", size_bytes=4 * 2**20, repeats=5)
    assert gbps > 0


def test_calibrate_saves_and_loads(monkeypatch):
    # The default 256 MiB copy is slow for a unit test; the measurement is tested above.
    sizes = []
    monkeypatch.setattr(rl, "measure_copy_bandwidth",
                        lambda device, size_bytes=None: sizes.append(size_bytes) or 9.5)
    c = rl.calibrate("cpu")
    assert c.copy_gbps == 9.5 and c.copy_source.startswith("measured ")
    entry = json.loads(rl.calibration_path().read_text())[c.device_name]
    assert entry["copy_gbps"] == 9.5 and entry["l2_flush"] == "clean"
    rl.calibrate("cpu", size_bytes=2**20)  # `calibrate --size-mib` passes its size on
    assert sizes == [None, 2**20]


def test_calibration_timed_another_way_is_not_used(cache_dir, monkeypatch):
    # entries saved before the flush had kinds (no "l2_flush") were timed behind the
    # previous sample's dirty lines: `run` measures again rather than use them
    monkeypatch.setattr(rl, "device_name", lambda device: "NVIDIA H200")
    path = rl.save_calibration("NVIDIA H200", 4321.0)
    data = json.loads(path.read_text())
    del data["NVIDIA H200"]["l2_flush"]
    path.write_text(json.dumps(data))
    assert rl.load_ceilings("cpu").copy_gbps is None
    data["NVIDIA H200"]["l2_flush"] = "dirty"
    path.write_text(json.dumps(data))
    assert rl.load_ceilings("cpu").copy_source == "none"


def test_calibration_copy_is_timed_after_a_clean_flush(monkeypatch):
    seen = []
    real = rl.time_call
    monkeypatch.setattr(rl, "time_call", lambda fn, device, **kw: seen.append(kw) or
                        real(fn, device, **kw))
    rl.measure_copy_bandwidth("cpu", size_bytes=2**16, repeats=3)
    assert seen == [dict(repeats=3, l2_flush="clean")]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_ceilings():
    c = rl.calibrate("cuda")
    assert c.copy_gbps > 100 and c.copy_source.startswith("measured ")
    sheet = rl.datasheet(c.device_name)
    if sheet:
        assert c.peak_tflops == sheet.fp32_tflops
        assert c.copy_gbps < sheet.copy_gbps * 1.05  # no copy beats the HBM datasheet
        assert rl.load_ceilings("cuda", datasheet_copy=True).copy_source.startswith("measured")


@pytest.fixture
def copies(monkeypatch):
    """same_bytes_copy_s with an empty memo, its buffer sizes and timing calls recorded."""
    monkeypatch.setattr(rl, "_same_bytes_copies", {})
    seen = {"sizes": [], "timing": []}
    real_buffers, real_time = rl._copy_buffers, rl.time_call

    def buffers(device, size):
        seen["sizes"].append(size)
        return real_buffers(device, size)

    def timed(fn, device, **kw):
        seen["timing"].append(kw)
        return real_time(fn, device, **kw)

    monkeypatch.setattr(rl, "_copy_buffers", buffers)
    monkeypatch.setattr(rl, "time_call", timed)
    return seen


def test_same_bytes_copy_moves_the_bytes_once_per_size(copies):
    cpu = torch.device("cpu")
    t = rl.same_bytes_copy_s(cpu, 1 << 16, warmup=1, repeats=3, max_time_s=0.5)
    assert t > 0
    assert copies["sizes"] == [1 << 15]  # half read, half written
    assert copies["timing"] == [dict(warmup=1, repeats=3, max_time_s=0.5)]
    assert rl.same_bytes_copy_s(cpu, 1 << 16, warmup=1, repeats=3, max_time_s=0.5) == t
    assert copies["sizes"] == [1 << 15]  # memoized
    assert rl.same_bytes_copy_s("cpu", (1 << 16) + 2, warmup=1, repeats=3) > 0
    assert copies["sizes"] == [1 << 15, (1 << 15) + 1]
    # timed another way (a different flush, say): measured again, not taken from the memo
    rl.same_bytes_copy_s(cpu, 1 << 16, warmup=1, repeats=3, max_time_s=0.5, l2_flush="dirty")
    assert copies["sizes"][-1] == 1 << 15 and copies["timing"][-1]["l2_flush"] == "dirty"


def test_same_bytes_copy_without_bytes_or_memory_is_none(copies, monkeypatch):
    assert [rl.same_bytes_copy_s("cpu", n) for n in (None, 0, 1)] == [None] * 3
    assert copies["sizes"] == []

    def no_memory(device, size):
        copies["sizes"].append(size)
        raise torch.cuda.OutOfMemoryError("CUDA out of memory")

    monkeypatch.setattr(rl, "_copy_buffers", no_memory)
    assert rl.same_bytes_copy_s("cpu", 1 << 40) is None
    assert rl.same_bytes_copy_s("cpu", 1 << 40) is None  # not tried again
    assert copies["sizes"] == [1 << 39] and copies["timing"] == []


def test_copy_buffers_hold_random_bytes_and_leave_the_rng_alone():
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    src, dst = rl._copy_buffers(torch.device("cpu"), 4096)
    assert src.shape == dst.shape == (4096,) and src.dtype == torch.uint8
    assert len(src.unique()) > 200
    assert torch.equal(torch.rand(3), expected)
