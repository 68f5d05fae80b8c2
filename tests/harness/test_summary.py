"""The run summary printed after `suite run`: one line per (op, implementation)."""

import dataclasses
import math

from bwd_suite.suite import summary
from bwd_suite.suite.outcomes import Determinism, Verdict
from bwd_suite.suite.rows import ResultRow


def _row(impl, frac_copy, frac_same, verdict="pass"):
    return ResultRow(op="softmax", impl=impl, verdict=Verdict(verdict),
                     determinism=Determinism.BITWISE, gbps=1000.0 * frac_copy,
                     frac_copy_bw=frac_copy, frac_same_copy=frac_same,
                     case_id=f"c{frac_copy}", reason="")


def test_summary_gives_geomeans_of_both_copy_fractions():
    rows = [_row("cuda", 0.5, 0.8), _row("cuda", 0.8, 1.25), _row("liger", 0.4, None),
            _row("liger", 0.9, 0.5, verdict="unsupported")]
    lines = summary.render(rows).splitlines()
    assert lines[0].rstrip().endswith("frac copy  same copy")
    cuda = next(line for line in lines if line.split()[1:2] == ["cuda"]).split()
    assert float(cuda[-2]) == float(format(math.sqrt(0.5 * 0.8), "10.3g"))
    assert float(cuda[-1]) == 1.0  # sqrt(0.8 * 1.25)
    # no same-bytes copy among liger's passing items (an older run): shown as "-"
    liger = next(line for line in lines if line.split()[1:2] == ["liger"]).split()
    assert liger[-2:] == ["0.4", "-"]
    assert lines[-1].startswith("'same copy'")


def test_summary_names_the_l2_flush():
    rows = [_row("cuda", 0.5, 0.8), _row("cuda", 0.6, 0.9)]
    assert "flush" not in summary.render(rows)  # nothing timed says how (CPU rows: none)
    cpu = [dataclasses.replace(r, l2_flush="none", timing_method="perf_counter") for r in rows]
    assert "flush" not in summary.render(cpu)  # the option does not apply on CPU
    rows = [dataclasses.replace(r, l2_flush=k, timing_method="cuda_events")
            for r, k in zip(rows, ("clean", None))]
    assert summary.render(rows).splitlines()[-1] == "timed after a clean L2 flush (--l2-flush)."
    rows[1].l2_flush = "none"
    assert summary.render(rows).splitlines()[-1] == (
        "timed after a clean L2 flush / without an L2 flush (--l2-flush).")


def test_summary_shows_device_and_wall_time_and_launches():
    rows = [dataclasses.replace(_row("cuda", 0.5, 0.8), time_median_s=t, wall_median_ms=w,
                                launches=n, peak_mem_bytes=m)
            for t, w, n, m in ((1e-3, 1.5, 3, 0), (2e-3, 2.5, 5, 8_400_000), (4e-3, 4.5, 3, 10))]
    rows.append(dataclasses.replace(_row("cpu_ref", 0.2, 0.3), time_median_s=1e-2,
                                    wall_median_ms=10.0))
    lines = summary.render(rows).splitlines()
    head = lines[0].split()
    at = head.index("ms")  # "dev ms wall ms launches temp MB" before "median GB/s"
    assert head[at - 1:at + 6] == ["dev", "ms", "wall", "ms", "launches", "temp", "MB"]
    cuda = next(line for line in lines if line.split()[1:2] == ["cuda"]).split()
    assert cuda[-7:-3] == ["2", "2.5", "3-5", "8.4"]  # medians, fewest-most, the most MB
    cpu = next(line for line in lines if line.split()[1:2] == ["cpu_ref"]).split()
    assert cpu[-7:-3] == ["10", "10", "-", "-"]  # not counted off CUDA
    assert any("'launches'" in line for line in lines)
