"""Results store: one parquet file per run, one row per (case, implementation).

The schema is one explicit constant with a version in its metadata (asv's habit). A file
of an older version is upgraded in memory by numbered migration steps (`_MIGRATIONS`,
one per version); a newer one is refused with a one-line error, never misread. The
writer rewrites the file under a temporary name and renames it as rows arrive (at most
once a second, and always at close), so a crash or Ctrl-C keeps every finished row.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable, Optional

import pyarrow as pa
import pyarrow.parquet as pq

from suite.errors import SuiteInputError

SCHEMA_VERSION = 5

OUTPUT_STRUCT = pa.struct([
    ("name", pa.string()), ("tol_class", pa.string()), ("numel", pa.int64()),
    ("scale", pa.float64()), ("err", pa.float64()), ("ref_err", pa.float64()),
    ("cond_err", pa.float64()), ("allowed", pa.float64()), ("max_abs", pa.float64()), ("max_rel", pa.float64()),
    ("rel_l2", pa.float64()), ("n_bad", pa.int64()), ("n_nonfinite", pa.int64()),
    ("n_unwritten", pa.int64()), ("worst_index", pa.string()),
])

# One struct per (wrong output, region) holding some of its wrong elements (suite/diagnosis)
LOCATION_STRUCT = pa.struct([
    ("output", pa.string()), ("region", pa.string()), ("n_bad", pa.int64()),
    ("n_region", pa.int64()), ("share", pa.float64()), ("density", pa.float64()),
    ("coverage", pa.float64()),
])
# One struct per (wrong output, reference term): error ~ coef * term, residual left
TERM_STRUCT = pa.struct([
    ("output", pa.string()), ("term", pa.string()), ("coef", pa.float64()),
    ("residual", pa.float64()),
])

# Keep in step with the "Results schema" table in README.md (a test compares them).
SCHEMA = pa.schema([
    # run and environment (the same on every row of a file)
    ("run_id", pa.string()), ("run_started", pa.string()), ("git_commit", pa.string()),
    ("host", pa.string()), ("device", pa.string()), ("device_name", pa.string()),
    ("driver", pa.string()), ("torch_version", pa.string()), ("cuda_version", pa.string()),
    ("python_version", pa.string()), ("profile", pa.string()),
    # case
    ("op", pa.string()), ("case_id", pa.string()), ("case_group", pa.string()),
    ("case_file", pa.string()), ("tags", pa.list_(pa.string())),
    ("params_json", pa.string()), ("seed", pa.int64()),
    # implementation
    ("impl", pa.string()), ("impl_kind", pa.string()), ("impl_version", pa.string()),
    # verdict
    ("verdict", pa.string()), ("failure_kind", pa.string()), ("reason", pa.string()),
    ("outputs", pa.list_(OUTPUT_STRUCT)),
    # diagnosis of failing items (null / empty on the others; added in version 2)
    ("diagnosis", pa.string()), ("diagnosis_cause", pa.string()),
    ("error_locations", pa.list_(LOCATION_STRUCT)), ("error_terms", pa.list_(TERM_STRUCT)),
    ("determinism", pa.string()), ("det_repeats", pa.int32()), ("det_spread", pa.float64()),
    # timing
    ("timing_method", pa.string()), ("time_samples_s", pa.list_(pa.float64())),
    ("time_median_s", pa.float64()), ("time_iqr_s", pa.float64()),
    # l2_flush: "clean", "dirty" or "none" (suite.timing; a boolean before version 4);
    # timing_pacing: how the GPU was kept ahead of the host (version 5), null off CUDA
    ("time_warmup", pa.int32()), ("l2_flush", pa.string()), ("timing_pacing", pa.string()),
    # roofline
    ("bytes", pa.int64()), ("flops", pa.int64()), ("gbps", pa.float64()),
    ("copy_gbps", pa.float64()), ("frac_copy_bw", pa.float64()),
    # a device copy of the same bytes timed alike (added in version 3)
    ("same_copy_s", pa.float64()), ("frac_same_copy", pa.float64()),
    ("arith_intensity", pa.float64()), ("bound", pa.string()),
    ("peak_mem_bytes", pa.int64()), ("duration_s", pa.float64()),
], metadata={b"bwd_suite_schema_version": str(SCHEMA_VERSION).encode()})


def _git_commit() -> str:
    """Short commit of this checkout; BWD_SUITE_COMMIT where the tree travels without .git."""
    if os.environ.get("BWD_SUITE_COMMIT"):
        return os.environ["BWD_SUITE_COMMIT"]
    try:
        out = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True,
                             text=True, timeout=5, cwd=Path(__file__).resolve().parents[1])
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5,
                               cwd=Path(__file__).resolve().parents[1]).stdout.strip()
        return out.stdout.strip() + ("-dirty" if dirty else "") if out.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def environment(device, profile: str = "") -> dict:
    """The run-level columns, captured once per run."""
    import torch

    dev = torch.device(device)
    name, driver = platform.processor() or platform.machine(), ""
    if dev.type == "cuda":
        name = torch.cuda.get_device_name(dev)
        try:
            driver = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True, text=True, timeout=10).stdout.strip().splitlines()[0]
        except (OSError, subprocess.SubprocessError, IndexError):
            driver = ""
    return {
        "run_id": datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-"
                  + uuid.uuid4().hex[:6],
        "run_started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "git_commit": _git_commit(),
        "host": socket.gethostname(),
        "device": str(dev),
        "device_name": name,
        "driver": driver,
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda or "",
        "python_version": platform.python_version(),
        "profile": profile,
    }


def params_json(params) -> str:
    return json.dumps(dict(params), sort_keys=True)


class ResultsWriter:
    """Appends rows and keeps `path` a valid parquet file of all rows written so far."""

    def __init__(self, path: Path, flush_every_s: float = 1.0):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.rows: list[dict] = []
        self.flush_every_s = flush_every_s
        self._last_flush = 0.0

    def append(self, row: dict) -> None:
        missing = set(SCHEMA.names) - set(row)
        extra = set(row) - set(SCHEMA.names)
        if missing or extra:
            raise ValueError(f"result row: missing {sorted(missing)}, unknown {sorted(extra)}")
        self.rows.append(row)
        if time.monotonic() - self._last_flush >= self.flush_every_s:
            self.flush()

    def flush(self) -> None:
        table = pa.Table.from_pylist(self.rows, schema=SCHEMA)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        pq.write_table(table, tmp)
        os.replace(tmp, self.path)
        self._last_flush = time.monotonic()

    def close(self) -> None:
        self.flush()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _files(paths: Iterable) -> list[Path]:
    files = []
    for p in map(Path, paths):
        if p.is_dir():
            files += sorted(p.rglob("*.parquet"))
        elif p.exists():
            files.append(p)
        else:
            raise SuiteInputError(str(p), "no such results file or folder")
    if not files:
        raise SuiteInputError(", ".join(map(str, paths)), "holds no .parquet results")
    return files


def _add_null_columns(table: pa.Table, names: Iterable[str]) -> pa.Table:
    for name in names:
        table = table.append_column(SCHEMA.field(name),
                                    pa.nulls(table.num_rows, SCHEMA.field(name).type))
    return table


def _v1_to_v2(table: pa.Table) -> pa.Table:
    """Version 2 added the diagnosis columns; version-1 rows have none (null)."""
    return _add_null_columns(table, ("diagnosis", "diagnosis_cause", "error_locations",
                                     "error_terms"))


def _v2_to_v3(table: pa.Table) -> pa.Table:
    """Version 3 added the same-bytes copy columns; version-2 rows have none (null)."""
    return _add_null_columns(table, ("same_copy_s", "frac_same_copy"))


def _v3_to_v4(table: pa.Table) -> pa.Table:
    """Version 4 names the kind of L2 flush instead of a boolean: the flush of versions 1-3
    zeroed its buffer ("dirty"); false was "none"."""
    i = table.schema.get_field_index("l2_flush")
    kinds = [None if v is None else ("dirty" if v else "none")
             for v in table.column(i).to_pylist()]
    return table.set_column(i, SCHEMA.field("l2_flush"), pa.array(kinds, pa.string()))


def _v4_to_v5(table: pa.Table) -> pa.Table:
    """Version 5 names the pacing of CUDA samples: up to version 4 the GPU spun before each
    sample for twice the host time of a call ("spacer"), with a warm-up of calls only."""
    method = table.column("timing_method").to_pylist()
    pacing = ["spacer" if m == "cuda_events" else None for m in method]
    return table.append_column(SCHEMA.field("timing_pacing"), pa.array(pacing, pa.string()))


# version N -> the step that turns a version-N table into version N+1
_MIGRATIONS = {1: _v1_to_v2, 2: _v2_to_v3, 3: _v3_to_v4, 4: _v4_to_v5}


def read_table(path: Path) -> pa.Table:
    """One results file as a table of the current schema (older versions upgraded)."""
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowInvalid) as e:
        raise SuiteInputError(str(path), f"not a readable parquet file: {e}") from None
    version = (table.schema.metadata or {}).get(b"bwd_suite_schema_version")
    if version is None:
        raise SuiteInputError(str(path), "not a bwd-suite results file (no schema version)")
    version = int(version)
    if version > SCHEMA_VERSION:
        raise SuiteInputError(str(path), f"schema version {version}, newer than this suite "
                                         f"reads (up to version {SCHEMA_VERSION})")
    if version == SCHEMA_VERSION:
        return table
    for step in range(version, SCHEMA_VERSION):
        if step not in _MIGRATIONS:
            raise SuiteInputError(str(path), f"schema version {version} cannot be upgraded "
                                             f"to version {SCHEMA_VERSION}")
        table = _MIGRATIONS[step](table)
    # the current column order, types and metadata, so that files of any version concat
    return table.select(SCHEMA.names).cast(SCHEMA)


def read_results(paths: Iterable, columns: Optional[list] = None):
    """All rows of the given files or folders as one pandas DataFrame."""
    tables = [read_table(f) for f in _files(paths)]
    table = pa.concat_tables(tables)
    if columns:
        table = table.select(columns)
    return table.to_pandas()
