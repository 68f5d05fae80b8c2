"""The parquet store: round trip, schema as documented in docs/results-schema.md, version checks,
atomic incremental writes."""

import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from bwd_suite.suite import registry, results
from bwd_suite.suite.errors import SuiteInputError
from bwd_suite.suite.roofline import Ceilings
from bwd_suite.suite.runner import RunOptions, item_row, run_case
from tests.harness.test_verdicts import make_case

SCHEMA_DOC = Path(__file__).resolve().parents[2] / "docs" / "results-schema.md"
CEIL = Ceilings(device_name="cpu", copy_gbps=10.0, copy_source="test", peak_tflops=None)


@pytest.fixture(scope="module")
def rows():
    spec = registry.op("causal_conv1d")
    impls = registry.select_implementations("causal_conv1d", ["torch_ref", "torch_tiled"])
    opts = RunOptions(device=torch.device("cpu"), golden_device=torch.device("cpu"),
                      repeats=2, timing=True, warmup=1, samples=5, max_time_s=0.5)
    env = results.environment("cpu", "test")
    return list(run_case(spec, make_case(), impls, opts, env, CEIL))


def test_round_trip_keeps_every_value(rows, tmp_path):
    path = tmp_path / "run.parquet"
    with results.ResultsWriter(path) as w:
        for r in rows:
            w.append(r)
    df = results.read_results([path])
    assert len(df) == len(rows)
    for r, (_, back) in zip(rows, df.iterrows()):
        for col in ("case_id", "impl", "verdict", "determinism", "bytes", "params_json",
                    "time_median_s", "gbps", "git_commit", "device"):
            assert back[col] == getattr(r, col), col
        assert list(back["time_samples_s"]) == r.time_samples_s
        assert len(r.time_samples_s) >= 3
        assert [o["name"] for o in back["outputs"]] == [o["name"] for o in r.outputs]
        assert [o["err"] for o in back["outputs"]] == [o["err"] for o in r.outputs]
        assert back["gbps"] == pytest.approx(r.bytes / r.time_median_s / 1e9)
    # and back into typed rows, equal to those written
    assert results.read_rows([path]) == rows


def test_timed_rows_carry_the_same_bytes_copy(rows, tmp_path):
    """Each timed row holds the median of a copy of its own bytes, timed alike, and its
    speed as a fraction of that copy's; both survive the round trip."""
    timed = [r for r in rows if r.time_median_s]
    assert timed
    for r in timed:
        assert r.same_copy_s > 0
        assert r.frac_same_copy == pytest.approx(r.same_copy_s / r.time_median_s)
    path = tmp_path / "run.parquet"
    with results.ResultsWriter(path) as w:
        for r in rows:
            w.append(r)
    df = results.read_results([path])
    assert list(df.frac_same_copy) == [r.frac_same_copy for r in rows]


def _old_file(rows, path, version, flushed):
    """rows written as a version-2 or -3 file: no columns added since, l2_flush a boolean
    (`flushed` per row)."""
    dropped = {"timing_pacing"} | ({"same_copy_s", "frac_same_copy"} if version == 2 else set())
    schema = pa.schema([pa.field("l2_flush", pa.bool_()) if f.name == "l2_flush" else f
                        for f in results.SCHEMA if f.name not in dropped],
                       metadata={b"bwd_suite_schema_version": str(version).encode()})
    old = [{**{k: r.to_record()[k] for k in schema.names}, "l2_flush": f}
           for r, f in zip(rows, flushed)]
    pq.write_table(pa.Table.from_pylist(old, schema=schema), path)


def test_version_2_files_are_upgraded_with_null_same_bytes_copies(rows, tmp_path):
    _old_file(rows, tmp_path / "v2.parquet", 2, [False] * len(rows))
    with results.ResultsWriter(tmp_path / "current.parquet") as w:
        for r in rows:
            w.append(r)
    df = results.read_results([tmp_path])  # both versions in one frame
    assert list(df.columns) == results.SCHEMA.names and len(df) == 2 * len(rows)
    timed = df[df.time_median_s.notna()]
    assert timed.same_copy_s.isna().sum() == len(timed) // 2  # the version-2 half
    assert (timed.same_copy_s.notna() == timed.frac_same_copy.notna()).all()


def test_version_3_flush_booleans_become_kinds(rows, tmp_path):
    """Versions 1-3 flushed by zeroing a buffer: true reads as "dirty", false as "none"."""
    three = (rows * 3)[:3]
    flushed = [True, False, None]
    _old_file(three, tmp_path / "v3.parquet", 3, flushed)
    df = results.read_results([tmp_path / "v3.parquet"])
    assert list(df.l2_flush[:2]) == ["dirty", "none"] and df.l2_flush.isna()[2]
    assert list(df.same_copy_s) == [r.same_copy_s for r in three]  # the rest as it was


def test_version_4_cuda_timings_read_as_spacer_paced(rows, tmp_path):
    """Up to version 4 CUDA samples were paced by a spin before each; other rows: null."""
    four = [dict(r.to_record(), timing_method=m) for r, m in zip((rows * 3)[:3],
                                                     ["cuda_events", "perf_counter", None])]
    schema = pa.schema([f for f in results.SCHEMA if f.name != "timing_pacing"],
                       metadata={b"bwd_suite_schema_version": b"4"})
    pq.write_table(pa.Table.from_pylist([{k: r[k] for k in schema.names} for r in four],
                                        schema=schema), tmp_path / "v4.parquet")
    df = results.read_results([tmp_path / "v4.parquet"])
    assert list(df.columns) == results.SCHEMA.names
    assert df.timing_pacing[0] == "spacer" and df.timing_pacing[1:].isna().all()
    assert list(df.l2_flush) == [r["l2_flush"] for r in four]  # the rest as it was


def test_docs_document_the_schema():
    text = SCHEMA_DOC.read_text()
    section = text.split("## Columns", 1)[1].split("\n## ", 1)[0]
    documented = re.findall(r"^\| `(\w+)` \| `([^`]+)` \|", section, flags=re.M)
    assert documented, "docs/results-schema.md has no schema table"
    assert [n for n, _ in documented] == results.SCHEMA.names
    for name, typ in documented:
        assert typ == str(results.SCHEMA.field(name).type).split("<")[0], name
    assert f"version {results.SCHEMA_VERSION}" in section


def test_rows_must_match_the_schema(rows, tmp_path):
    w = results.ResultsWriter(tmp_path / "x.parquet")
    with pytest.raises(ValueError, match="missing"):
        w.append({k: v for k, v in rows[0].to_record().items() if k != "verdict"})
    with pytest.raises(ValueError, match="unknown"):
        w.append(dict(rows[0].to_record(), surprise=1))


def test_every_row_is_readable_as_it_arrives_and_no_temporary_is_left(rows, tmp_path):
    path = tmp_path / "run.parquet"
    w = results.ResultsWriter(path)
    for i, r in enumerate(rows, 1):
        w.append(r)
        assert len(results.read_results([path])) == i  # from the journal
    w.close()
    assert [p.name for p in tmp_path.iterdir()] == ["run.parquet"]
    assert len(results.read_results([path])) == len(rows)


def test_a_version_tag_with_a_missing_column_is_one_line(rows, tmp_path):
    table = pa.Table.from_pylist([r.to_record() for r in rows], schema=results.SCHEMA)
    pq.write_table(table.drop_columns(["verdict"]), tmp_path / "cut.parquet")
    with pytest.raises(SuiteInputError, match=rf"cut.parquet: schema version "
                                              rf"{results.SCHEMA_VERSION} but the "
                                              r"columns \['verdict'\] are missing"):
        results.read_results([tmp_path / "cut.parquet"])


def test_version_5_files_read_with_no_known_failures(rows, tmp_path):
    schema = pa.schema([f for f in results.SCHEMA if f.name != "known_failure"],
                       metadata={b"bwd_suite_schema_version": b"5"})
    recs = [{k: r.to_record()[k] for k in schema.names} for r in rows]
    pq.write_table(pa.Table.from_pylist(recs, schema=schema), tmp_path / "v5.parquet")
    df = results.read_results([tmp_path / "v5.parquet"])
    assert list(df.columns) == results.SCHEMA.names and df.known_failure.isna().all()


def test_version_7_files_read_with_null_stats_wall_times_and_launches(rows, tmp_path):
    added = {"stats_json", "wall_median_ms", "launches"}
    schema = pa.schema([f for f in results.SCHEMA if f.name not in added],
                       metadata={b"bwd_suite_schema_version": b"7"})
    recs = [{k: r.to_record()[k] for k in schema.names} for r in rows]
    pq.write_table(pa.Table.from_pylist(recs, schema=schema), tmp_path / "v7.parquet")
    df = results.read_results([tmp_path / "v7.parquet"])
    assert list(df.columns) == results.SCHEMA.names
    assert df[sorted(added)].isna().all().all()
    assert list(df.time_median_s) == [r.time_median_s for r in rows]


LEDGER_AND_COMPUTE = ("tflops", "peak_tflops", "frac_peak_flops", "saved_bytes",
                      "memory_bounds_json")


def test_version_9_files_read_with_no_compute_roofline_or_ledger(rows, tmp_path):
    schema = pa.schema([f for f in results.SCHEMA if f.name not in LEDGER_AND_COMPUTE],
                       metadata={b"bwd_suite_schema_version": b"9"})
    recs = [{k: r.to_record()[k] for k in schema.names} for r in rows]
    pq.write_table(pa.Table.from_pylist(recs, schema=schema), tmp_path / "v9.parquet")
    df = results.read_results([tmp_path / "v9.parquet"])
    assert list(df.columns) == results.SCHEMA.names
    assert df[list(LEDGER_AND_COMPUTE)].isna().all().all()  # nothing derived
    assert list(df.time_median_s) == [r.time_median_s for r in rows]


def test_version_10_files_read_with_no_implementation_origin(rows, tmp_path):
    schema = pa.schema([f for f in results.SCHEMA if f.name != "impl_origin"],
                       metadata={b"bwd_suite_schema_version": b"10"})
    recs = [{k: r.to_record()[k] for k in schema.names} for r in rows]
    pq.write_table(pa.Table.from_pylist(recs, schema=schema), tmp_path / "v10.parquet")
    df = results.read_results([tmp_path / "v10.parquet"])
    assert list(df.columns) == results.SCHEMA.names and df.impl_origin.isna().all()


def test_an_outside_implementation_keeps_its_origin():
    """A decorated outside implementation is named by its registration; the row keeps
    the module that loads it, for the command that reruns it."""
    impl = registry.external_implementation("tests.helpers:known_bad")
    row = item_row(None, make_case(), impl, registry.op("causal_conv1d"), "cpu")
    assert (row.impl, row.impl_origin) == ("tests_known_bad",
                                           "causal_conv1d=tests.helpers:known_bad")
    ref, = registry.select_implementations("causal_conv1d", ["torch_ref"])
    assert item_row(None, make_case(), ref, registry.op("causal_conv1d"), "cpu") \
        .impl_origin is None


def test_cpu_rows_carry_tflops_and_no_compute_peak(rows, tmp_path):
    timed = [r for r in rows if r.time_median_s]
    assert timed
    for r in timed:
        assert r.tflops == pytest.approx(r.flops / r.time_median_s / 1e12)
        assert r.peak_tflops is None and r.frac_peak_flops is None  # a CPU has no GEMM peak
        # causal_conv1d declares no memory bounds, and nothing here fills saved_bytes
        assert r.memory_bounds_json is None and r.saved_bytes is None
    path = tmp_path / "run.parquet"
    with results.ResultsWriter(path) as w:
        for r in rows:
            w.append(r)
    assert list(results.read_results([path]).tflops) == [r.tflops for r in rows]


def _with(rows, path, **columns):
    """rows written as a current file, with `columns` (name -> (arrow type, value)) set."""
    recs = [dict(r.to_record(), **{k: v for k, (_, v) in columns.items()}) for r in rows]
    schema = pa.schema([pa.field(f.name, columns[f.name][0]) if f.name in columns else f
                        for f in results.SCHEMA], metadata=results.SCHEMA.metadata)
    pq.write_table(pa.Table.from_pylist(recs, schema=schema), path)
    return path


def test_ledger_and_compute_columns_are_checked_on_reading(rows, tmp_path):
    good = _with(rows, tmp_path / "good.parquet", saved_bytes=(pa.int64(), 4096),
                 memory_bounds_json=(pa.string(), '{"materialised": 1024, "fused": 2.5e3}'),
                 tflops=(pa.float64(), 0.5), peak_tflops=(pa.float32(), 778.0))
    df = results.read_results([good])
    assert list(df.saved_bytes) == [4096] * len(rows) and df.peak_tflops[0] == 778.0
    assert results.read_results([_with(rows, tmp_path / "err.parquet", memory_bounds_json=(
        pa.string(), '{"error": "KeyError: \'seq\'"}'))]).memory_bounds_json.notna().all()
    refused = {
        "text.parquet": (dict(saved_bytes=(pa.string(), "4096")), "'saved_bytes' is string"),
        "number.parquet": (dict(memory_bounds_json=(pa.int64(), 7)),
                           "'memory_bounds_json' is int64"),
        "tflops.parquet": (dict(tflops=(pa.string(), "fast")), "'tflops' is string"),
        "negative.parquet": (dict(saved_bytes=(pa.int64(), -1)), "negative byte count"),
        "list.parquet": (dict(memory_bounds_json=(pa.string(), "[1, 2]")),
                         "not a JSON object of byte counts"),
        "words.parquet": (dict(memory_bounds_json=(pa.string(), '{"fused": "big"}')),
                          "not a JSON object of byte counts"),
        "cut.parquet": (dict(memory_bounds_json=(pa.string(), '{"fused": 1')),
                        "not a JSON object of byte counts"),
    }
    for name, (columns, message) in refused.items():
        with pytest.raises(SuiteInputError, match=re.escape(name) + ".*" + message):
            results.read_results([_with(rows, tmp_path / name, **columns)])


def test_a_journal_with_bad_memory_bounds_is_refused(rows, tmp_path):
    w = results.ResultsWriter(tmp_path / "run.parquet")
    w.append(dict(rows[0].to_record(), memory_bounds_json='"12 GB"'))
    with pytest.raises(SuiteInputError, match="run.parquet.journal.*memory_bounds_json"):
        results.read_results([tmp_path / "run.parquet"])
    w.close()


def test_cpu_rows_carry_the_wall_time_and_no_launches(rows):
    timed = [r for r in rows if r.time_median_s]
    assert timed
    for r in timed:
        assert r.wall_median_ms == pytest.approx(1e3 * r.time_median_s)
        assert r.launches is None and r.stats_json is None  # causal_conv1d declares none


def test_other_schema_version_is_refused(rows, tmp_path):
    table = pa.Table.from_pylist([r.to_record() for r in rows], schema=results.SCHEMA)
    table = table.replace_schema_metadata({b"bwd_suite_schema_version": b"99"})
    pq.write_table(table, tmp_path / "new.parquet")
    with pytest.raises(SuiteInputError, match="schema version 99"):
        results.read_results([tmp_path / "new.parquet"])


def test_unreadable_and_missing_results_are_one_line_errors(tmp_path):
    bad = tmp_path / "bad.parquet"
    bad.write_text("not parquet")
    with pytest.raises(SuiteInputError, match="bad.parquet: not a readable parquet"):
        results.read_results([bad])
    with pytest.raises(SuiteInputError, match="no such results"):
        results.read_results([tmp_path / "absent.parquet"])
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SuiteInputError, match="holds no .parquet"):
        results.read_results([empty])


def test_environment_is_captured(rows):
    r = rows[0]
    assert r.torch_version == torch.__version__
    assert r.device == "cpu" and r.run_id and r.python_version


def test_a_reason_of_megabytes_is_clipped_to_its_head_and_tail():
    from bwd_suite.suite.outcomes import Verdict
    from bwd_suite.suite.rows import MAX_REASON_CHARS, ResultRow

    huge = "head " + "x" * (4 << 20) + " tail"
    row = ResultRow(op="softmax", case_id="c", impl="i").finish(Verdict.ERROR, huge)
    assert len(row.reason) < MAX_REASON_CHARS + 100
    assert row.reason.startswith("head ") and row.reason.endswith(" tail")
    assert "characters cut" in row.reason
    short = ResultRow(op="softmax", case_id="c", impl="i").finish(Verdict.ERROR, "short")
    assert short.reason == "short"
