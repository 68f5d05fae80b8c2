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
    assert H200.balance() == pytest.approx(67e12 / 4000e9)  # 16.75 flops/byte
    assert r.tflops == pytest.approx(0.5) and r.peak_tflops == 67.0  # fp32: datasheet
    assert r.frac_peak_flops == pytest.approx(0.5 / 67)
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


# -- the compute ceiling: measured GEMM rates per dtype -------------------------------------

H100 = Ceilings("NVIDIA H100 80GB HBM3", copy_gbps=3000.0, copy_source="measured 2026-12-01",
                peak_tflops=67.0,
                gemm_tflops={"bfloat16": 778.0, "float16": 755.0, "float32": 51.0},
                gemm_source="measured 2026-12-01")
# attention backward B4 H16 L2048 d128 bf16, not causal: 10 d flops a visible pair and head
ATTN_FLOPS = 10 * 128 * 16 * 4 * 2048 * 2048
ATTN_BYTES = 2 * 8 * 4 * 16 * 2048 * 128 + 4 * 4 * 16 * 2048


def test_a_compute_bound_case_is_judged_by_the_gemm_peak_of_its_dtype():
    t = ATTN_FLOPS / 400e12  # 400 TFLOP/s
    r = roofline(ATTN_BYTES, ATTN_FLOPS, t, H100, dtype="bfloat16")
    assert r.arith_intensity > H100.balance("bfloat16") == pytest.approx(778e12 / 3000e9)
    assert r.bound == "compute"
    assert r.tflops == pytest.approx(400.0)
    assert r.peak_tflops == 778.0 and r.frac_peak_flops == pytest.approx(400 / 778)
    # the copy fraction is still computed (the bound says it is not the one that applies)
    assert r.frac_copy_bw == pytest.approx(ATTN_BYTES / t / 1e9 / 3000)
    # each dtype its own peak
    assert roofline(ATTN_BYTES, ATTN_FLOPS, t, H100, dtype="float16").peak_tflops == 755.0
    fp32 = roofline(ATTN_BYTES, ATTN_FLOPS, ATTN_FLOPS / 40e12, H100, dtype="float32")
    assert (fp32.peak_tflops, fp32.bound) == (51.0, "compute")
    assert fp32.frac_peak_flops == pytest.approx(40 / 51)


def test_a_memory_bound_case_is_judged_by_the_copy_bandwidth():
    # softmax backward 4096 x 8192 bf16: 3 tensors of 2 bytes, 4 flops an element
    n = 4096 * 8192
    r = roofline(6 * n, 4 * n, 6 * n / 2400e9, H100, dtype="bfloat16")
    assert r.bound == "memory"
    assert r.frac_copy_bw == pytest.approx(0.8)
    assert r.peak_tflops == 778.0 and r.tflops == pytest.approx(4 * n / (6 * n / 2400e9) / 1e12)
    # the ridge point is the dtype's: 100 flop/B is memory bound against bf16's tensor
    # cores (259 flop/B) and compute bound against fp32's rate (17 flop/B)
    assert roofline(1000, 100_000, 1e-6, H100, dtype="bfloat16").bound == "memory"
    assert roofline(1000, 100_000, 1e-6, H100, dtype="float32").bound == "compute"


def test_compute_peak_rule():
    assert [H100.compute_peak(d) for d in ("bfloat16", "float16", "float32", None)] == \
        [778.0, 755.0, 51.0, 51.0]
    assert H100.compute_peak("float64") is None  # no fp64 rate: no ceiling, no bound
    assert hash(H100) == hash(Ceilings(**{**H100.__dict__, "gemm_tflops": dict(
        reversed(list(H100.gemm_tflops.items())))}))  # frozen: hashable, rates in any order
    assert roofline(1000, 10**9, 1e-3, H100, dtype="float64").bound is None
    # not measured: fp32 falls back to the datasheet rate, 16-bit dtypes have none
    assert (H200.compute_peak("float32"), H200.compute_peak("bfloat16")) == (67.0, None)
    r = roofline(1000, 10**9, 1e-3, H200, dtype="bfloat16")
    assert (r.peak_tflops, r.frac_peak_flops, r.bound) == (None, None, None)
    assert r.tflops == pytest.approx(1.0)  # flops / time needs no ceiling


def test_tflops_needs_flops_and_a_time():
    cpu = Ceilings("cpu", 10.0, "measured", None)
    r = roofline(1000, 2_000_000, 1e-3, cpu, dtype="bfloat16")  # a CPU run: no peaks
    assert r.tflops == pytest.approx(2e-3) and r.peak_tflops is None and r.bound is None
    for median in (None, 0.0):
        r = roofline(1000, 2_000_000, median, H100, dtype="bfloat16")
        assert (r.tflops, r.frac_peak_flops, r.gbps) == (None, None, None)
    r = roofline(1000, None, 1e-3, H100, dtype="bfloat16")  # the op's flops raised
    assert (r.tflops, r.frac_peak_flops, r.arith_intensity, r.bound) == (None,) * 4
    assert r.gbps == pytest.approx(1e-3)


def test_gemm_rates_round_trip_with_the_copy(cache_dir, monkeypatch):
    monkeypatch.setattr(rl, "device_name", lambda device: "NVIDIA H100 80GB HBM3")
    rl.save_calibration("NVIDIA H100 80GB HBM3", 3000.0)
    path = rl.save_calibration("NVIDIA H100 80GB HBM3", gemm={
        "bfloat16": rl.GemmRate(778.0, 8192), "float32": rl.GemmRate(51.0, 4096)})
    entry = json.loads(path.read_text())["NVIDIA H100 80GB HBM3"]
    assert entry["copy_gbps"] == 3000.0  # saving the GEMM rates kept the copy
    assert entry["gemm"]["bfloat16"]["tflops"] == 778.0 and entry["gemm"]["bfloat16"]["n"] == 8192
    assert entry["gemm"]["float32"]["tf32"] is False
    rl.save_calibration("NVIDIA H100 80GB HBM3", gemm={"float16": rl.GemmRate(755.0, 8192)})
    rl.save_calibration("NVIDIA H100 80GB HBM3", 3100.0)  # a new copy keeps the rates
    c = rl.load_ceilings("cuda")
    assert c.copy_gbps == 3100.0
    assert c.gemm_tflops == {"bfloat16": 778.0, "float16": 755.0, "float32": 51.0}
    assert c.gemm_source.startswith("measured 20")
    assert c.compute_peak("bfloat16") == 778.0 and c.peak_tflops == 67  # datasheet kept
    assert rl.missing(c, "cuda") == ()


def test_an_old_calibration_file_reads_without_gemm_rates(cache_dir, monkeypatch):
    monkeypatch.setattr(rl, "device_name", lambda device: "NVIDIA H100 80GB HBM3")
    cache_dir.mkdir()
    old = {"NVIDIA H100 80GB HBM3": {"copy_gbps": 2950.0, "l2_flush": "clean",
                                     "measured_at": "2026-11-30T10:00:00+00:00",
                                     "torch": "2.11.0"}}
    (cache_dir / "calibration.json").write_text(json.dumps(old))
    c = rl.load_ceilings("cuda")
    assert (c.copy_gbps, c.gemm_tflops, c.gemm_source) == (2950.0, {}, "none")
    assert c.compute_peak("bfloat16") is None and c.compute_peak("float32") == 67
    assert rl.missing(c, "cuda") == ("bfloat16 GEMM", "float16 GEMM", "float32 GEMM")
    assert rl.missing(c, "cpu") == ()  # a CPU run measures no GEMM
    # damaged records are missing, not fatal
    old["NVIDIA H100 80GB HBM3"]["gemm"] = {"bfloat16": {"tflops": "fast"}, "float16": 3,
                                            "float32": {"tflops": -1.0}}
    (cache_dir / "calibration.json").write_text(json.dumps(old))
    assert rl.load_ceilings("cuda").gemm_tflops == {}


def test_calibrate_measures_what_is_missing(cache_dir, monkeypatch):
    """`run` calibrates only what the stored file lacks: an old file's GEMM rates."""
    monkeypatch.setattr(rl, "device_name", lambda device: "NVIDIA H100 80GB HBM3")
    copies, gemms = [], []
    monkeypatch.setattr(rl, "measure_copy_bandwidth",
                        lambda device, size_bytes=None: copies.append(size_bytes) or 3000.0)
    monkeypatch.setattr(rl, "measure_gemm_tflops", lambda device, dtype, n=rl.GEMM_SIZE:
                        gemms.append((str(device), dtype, n)) or rl.GemmRate(
                            {"bfloat16": 778.0, "float16": 755.0}.get(dtype, 51.0), n))
    rl.save_calibration("NVIDIA H100 80GB HBM3", 2950.0)  # a file of before the rates
    c = rl.calibrate("cuda", only_missing=True)
    assert copies == [] and [g[1] for g in gemms] == list(rl.GEMM_DTYPES)
    assert c.copy_gbps == 2950.0 and c.gemm_tflops["float16"] == 755.0
    assert rl.calibrate("cuda", only_missing=True) == c and len(gemms) == 3  # nothing new
    rl.calibrate("cuda", gemm_size=1024)  # `calibrate` measures everything again
    assert copies == [None] and gemms[3:] == [("cuda", d, 1024) for d in rl.GEMM_DTYPES]
    # on a CPU: the copy only
    monkeypatch.setattr(rl, "device_name", lambda device: "x86_64")
    c = rl.calibrate("cpu")
    assert c.copy_gbps == 3000.0 and c.gemm_tflops == {} and len(gemms) == 6


def test_a_dtype_whose_operands_never_fit_is_left_missing(cache_dir, monkeypatch):
    monkeypatch.setattr(rl, "device_name", lambda device: "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(rl, "measure_copy_bandwidth", lambda device, size_bytes=None: 3000.0)
    monkeypatch.setattr(rl, "measure_gemm_tflops", lambda device, dtype, n=rl.GEMM_SIZE:
                        None if dtype == "float32" else rl.GemmRate(700.0, n))
    c = rl.calibrate("cuda")
    assert set(c.gemm_tflops) == {"bfloat16", "float16"}
    assert rl.missing(c, "cuda") == ("float32 GEMM",)


def test_measure_gemm_on_the_cpu():
    rate = rl.measure_gemm_tflops("cpu", "float32", n=64, repeats=3)
    assert rate.n == 64 and 0 < rate.tflops < 100
    assert rl.measure_gemm_tflops("cpu", "bfloat16", n=32, repeats=2).tflops > 0
    with pytest.raises(ValueError, match="float8"):
        rl.measure_gemm_tflops("cpu", "float8", n=32)


def test_gemm_rate_is_the_best_sample_of_the_suites_timer(monkeypatch):
    from bwd_suite.suite.timing import Timing

    seen = []

    def timed(fn, device, **kw):
        out = fn()  # the timed call: a matmul into the preallocated output
        seen.append((kw, out.shape, out.dtype, torch.get_float32_matmul_precision()))
        return Timing(method="perf_counter", samples_s=(3e-3, 1e-3, 2e-3), warmup=3,
                      l2_flush="none")

    monkeypatch.setattr(rl, "time_call", timed)
    rate = rl.measure_gemm_tflops("cpu", "float16", n=128, repeats=3)
    assert rate == rl.GemmRate(2 * 128**3 / 1e-3 / 1e12, 128)
    assert seen == [(dict(repeats=3, l2_flush="clean"), (128, 128), torch.float16, "highest")]
    # fp32: TF32 off while timed, the process's setting restored after
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    try:
        rl.measure_gemm_tflops("cpu", "float32", n=16, repeats=3)
        assert seen[-1][3] == "highest" and torch.get_float32_matmul_precision() == "high"
    finally:
        torch.set_float32_matmul_precision(previous)


def test_gemm_operands_are_sized_down_until_they_fit(monkeypatch):
    tried = []
    real = rl._gemm_operands

    def operands(device, dtype, n):
        tried.append(n)
        if n > 2048:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory")
        return real(device, dtype, 8)  # small stand-ins: the size is what is tested

    monkeypatch.setattr(rl, "_gemm_operands", operands)
    from bwd_suite.suite.timing import Timing

    monkeypatch.setattr(rl, "time_call", lambda fn, device, **kw: Timing(
        method="perf_counter", samples_s=(1.0,), warmup=0, l2_flush="none"))
    assert rl.measure_gemm_tflops("cpu", "bfloat16").n == 2048
    assert tried == [8192, 4096, 2048]
    tried.clear()
    monkeypatch.setattr(rl, "_gemm_operands", lambda device, dtype, n: tried.append(n) or (
        _ for _ in ()).throw(MemoryError()))
    assert rl.measure_gemm_tflops("cpu", "bfloat16") is None
    assert tried == [8192, 4096, 2048, 1024]  # down to GEMM_MIN_SIZE, then none


def test_gemm_operands_are_random_and_leave_the_rng_alone():
    torch.manual_seed(3)
    expected = torch.rand(2)
    torch.manual_seed(3)
    a, b, c = rl._gemm_operands(torch.device("cpu"), torch.bfloat16, 16)
    assert a.shape == b.shape == c.shape == (16, 16) and a.dtype == torch.bfloat16
    assert (a != 0).all() and not torch.equal(a, b)
    assert torch.equal(torch.rand(2), expected)


def test_calibrate_command_prints_each_ceiling(cache_dir, monkeypatch, capsys):
    from bwd_suite.cli import main
    from bwd_suite.suite.commands import calibrate as command

    assert command.GEMM_SIZE == rl.GEMM_SIZE  # the help text's default is the real one
    monkeypatch.setattr(rl, "measure_copy_bandwidth", lambda device, size_bytes=None: 12.5)
    assert main(["calibrate", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "copy bandwidth 12.5 GB/s" in out and "no GEMM rate on cpu" in out
    c = Ceilings("NVIDIA H100", 3000.0, "measured", 67.0, gemm_tflops={"bfloat16": 778.04})
    assert command.lines(c, torch.device("cuda")) == [
        "NVIDIA H100: copy bandwidth 3000.0 GB/s (read + write)",
        "NVIDIA H100: bfloat16 GEMM 778.0 TFLOP/s"]
    assert main(["calibrate", "--device", "cpu", "--gemm-size", "0"]) == 2


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_gemm_rates():
    c = rl.calibrate("cuda")
    assert set(c.gemm_tflops) == set(rl.GEMM_DTYPES)
    sheet = rl.datasheet(c.device_name)
    for dtype in ("bfloat16", "float16"):
        assert c.gemm_tflops[dtype] > c.gemm_tflops["float32"]  # tensor cores vs TF32 off
        if sheet:
            assert c.gemm_tflops[dtype] < sheet.bf16_dense_tflops * 1.05
    if sheet:
        assert c.gemm_tflops["float32"] < sheet.fp32_tflops * 1.05  # not TF32's rate
