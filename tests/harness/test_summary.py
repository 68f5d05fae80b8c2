"""The run summary printed after `suite run`: one line per (op, implementation), in the
page's units (suite/units.py), within 100 columns unless --wide, then one final line of
counts."""

import dataclasses
import math

from bwd_suite.suite import summary, units
from bwd_suite.suite.outcomes import Determinism, Verdict
from bwd_suite.suite.rows import ResultRow


def _row(impl, frac_copy, frac_same, verdict="pass"):
    return ResultRow(op="softmax", impl=impl, verdict=Verdict(verdict),
                     determinism=Determinism.BITWISE, gbps=1000.0 * frac_copy,
                     frac_copy_bw=frac_copy, frac_same_copy=frac_same,
                     case_id=f"c{frac_copy}", reason="")


def table(text: str) -> dict:
    """impl -> {column head: its cell's text} of the summary's table, read by the header's
    columns (right-aligned under their heads)."""
    lines = text.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("  implementation"))
    head = lines[at]
    ends, pos = [], len("  implementation")
    for col in summary.COLUMNS:
        found = head.find(col.head, pos)
        if found >= 0 and head[found - 1] == " ":
            pos = found + len(col.head)
            ends.append((col.head, pos, col.width))
    out = {}
    for ln in lines[at + 2:]:
        if not ln.startswith("  ") or len(ln) < pos:
            if out:
                break
            continue
        out[ln[:ends[0][1] - ends[0][2]].strip()] = {
            h: ln[end - width:end].strip() for h, end, width in ends}
    return out


def test_summary_gives_geomeans_of_both_copy_fractions_as_percentages():
    rows = [_row("cuda", 0.5, 0.8), _row("cuda", 0.8, 1.25), _row("liger", 0.4, None),
            _row("liger", 0.9, 0.5, verdict="unsupported")]
    t = table(summary.render(rows, wide=True))
    assert t["cuda"]["of copy BW"] == units.percent(math.sqrt(0.5 * 0.8)) == "63.2 %"
    assert t["cuda"]["same copy"] == "100 %"  # sqrt(0.8 * 1.25)
    # no same-bytes copy among liger's passing items (an older run): shown as "-"
    assert (t["liger"]["of copy BW"], t["liger"]["same copy"]) == ("40 %", "-")
    narrow = table(summary.render(rows))
    assert narrow["cuda"]["of copy BW"] == "63.2 %" and "same copy" not in narrow["cuda"]


def test_a_compute_bound_item_counts_against_the_peak_not_the_copy_bandwidth():
    rows = [dataclasses.replace(_row("attn", 0.01, None), bound="compute",
                                frac_peak_flops=0.0628),
            dataclasses.replace(_row("attn", 0.5, None), bound="memory")]
    t = table(summary.render(rows))
    assert (t["attn"]["of copy BW"], t["attn"]["of peak"]) == ("50 %", "6.28 %")


def test_summary_names_the_l2_flush():
    rows = [_row("cuda", 0.5, 0.8), _row("cuda", 0.6, 0.9)]
    assert "flush" not in summary.render(rows)  # nothing timed says how (CPU rows: none)
    cpu = [dataclasses.replace(r, l2_flush="none", timing_method="perf_counter") for r in rows]
    assert "flush" not in summary.render(cpu)  # the option does not apply on CPU
    rows = [dataclasses.replace(r, l2_flush=k, timing_method="cuda_events")
            for r, k in zip(rows, ("clean", None))]
    assert summary.render(rows).splitlines()[-2] == "timed after a clean L2 flush (--l2-flush)."
    rows[1].l2_flush = "none"
    assert summary.render(rows).splitlines()[-2] == (
        "timed after a clean L2 flush / without an L2 flush (--l2-flush).")


def test_wide_summary_shows_device_and_wall_time_and_launches():
    rows = [dataclasses.replace(_row("cuda", 0.5, 0.8), time_median_s=t, wall_median_ms=w,
                                launches=n, peak_mem_bytes=m)
            for t, w, n, m in ((1e-3, 1.5, 3, 0), (2e-3, 2.5, 5, 8_400_000), (4e-3, 4.5, 3, 10))]
    rows.append(dataclasses.replace(_row("cpu_ref", 0.2, 0.3), time_median_s=1e-2,
                                    wall_median_ms=10.0))
    text = summary.render(rows, wide=True)
    t = table(text)
    cells = ("dev time", "wall", "launches", "temp mem")
    # medians, fewest-most, the most memory: in the page's units
    assert [t["cuda"][c] for c in cells] == ["2 ms", "2.5 ms", "3-5", "8.4 MB"]
    assert [t["cpu_ref"][c] for c in cells] == ["10 ms", "10 ms", "-", "-"]  # not off CUDA
    assert "'launches'" in text
    assert "dev time" not in summary.render(rows)  # one flag away: --wide


def test_the_summary_fits_100_columns_and_ends_with_its_counts():
    long = "mutant_softmax_row_group_shared_dot_with_a_very_long_name"
    # op "toy": no diagnosis hook in the registry to run over these fake rows
    rows = [dataclasses.replace(_row(long, 0.5, 0.8), op="toy"),
            dataclasses.replace(_row("cuda", 0.5, 0.8, "unsupported"), op="toy"),
            ResultRow(op="toy", impl="cuda", case_id="c1").finish(Verdict.FAIL, "x " * 200),
            ResultRow(op="toy", impl="cuda", case_id="c2", known_failure="declared")
            .finish(Verdict.ERROR, "boom"),
            ResultRow(op="toy", impl="cuda", case_id="c3", known_failure="declared")
            .finish(Verdict.PASS),
            ResultRow(op="toy", impl="cuda", case_id="c4").finish(Verdict.TIMEOUT, "slow")]
    text = summary.render(rows, footer=["results: r.parquet"], elapsed_s=2.5)
    lines = text.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("  implementation"))
    assert all(len(ln) <= summary.WIDTH for ln in lines[at:]), text
    assert any(ln.startswith("  mutant_") and "…" in ln for ln in lines[at:])
    assert lines[-2] == "results: r.parquet"
    assert lines[-1] == ("1 passed, 1 failed, 0 errors, 1 unsupported, 1 known failure, "
                         "1 timeout, 1 unexpected pass in 2.5 s")
    # the failures come first: the table is last
    assert text.index("2 failing items:") < at
    t = table(text)
    assert {k: t["cuda"][k] for k in ("pass", "fail", "known", "error", "t/o")} == {
        "pass": "1", "fail": "1", "known": "1", "error": "0", "t/o": "1"}
    assert len(table(summary.render(rows, wide=True))) == 2  # whole names in --wide
    assert long in summary.render(rows, wide=True)


def test_failure_reasons_are_shortened_at_a_word_boundary_or_whole_on_request():
    reason = "dx mismatch: " + " ".join(f"word{i}" for i in range(60))
    rows = [ResultRow(op="toy", impl="cuda", case_id="c1").finish(Verdict.FAIL, reason)]
    line = summary.render(rows).splitlines()[2]
    assert line.startswith("        dx mismatch: word0 ") and line.endswith("…")
    assert len(line) <= summary.WIDTH
    assert reason.startswith(line.strip()[:-1]) and line.strip()[-2].isdigit()  # whole words
    assert summary.render(rows, full_reasons=True).splitlines()[2].strip() == reason
