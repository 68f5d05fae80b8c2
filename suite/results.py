"""Results store: one parquet file per run, one row per (case, implementation).

The schema is derived from the typed row (suite/rows.py) and carries a version in its
metadata (asv's habit). A file
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

from suite import rows
from suite.errors import SuiteInputError
from suite.rows import ResultRow, RunInfo

# The schema is derived from the typed row (suite/rows.py), the one place a column is
# declared; docs/results-schema.md documents it (a test compares them).
SCHEMA = rows.SCHEMA
SCHEMA_VERSION = rows.SCHEMA_VERSION
OUTPUT_STRUCT, LOCATION_STRUCT, TERM_STRUCT = (rows.OUTPUT_STRUCT, rows.LOCATION_STRUCT,
                                               rows.TERM_STRUCT)


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


def environment(device, profile: str = "") -> RunInfo:
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
    now = datetime.now(timezone.utc)
    return RunInfo(
        run_id=now.strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:6],
        run_started=now.isoformat(timespec="seconds"),
        git_commit=_git_commit(),
        host=socket.gethostname(),
        device=str(dev),
        device_name=name,
        driver=driver,
        torch_version=torch.__version__,
        cuda_version=torch.version.cuda or "",
        python_version=platform.python_version(),
        profile=profile,
    )


def params_json(params) -> str:
    return json.dumps(dict(params), sort_keys=True)


def read_rows(paths: Iterable) -> list[ResultRow]:
    """All rows of the given files or folders as typed rows."""
    return [ResultRow.from_record(r) for r in read_results(paths).to_dict("records")]


class ResultsWriter:
    """Appends rows and keeps `path` a valid parquet file of all rows written so far.

    A driver sink (suite/driver.py): `add` takes typed rows; `append` also takes stored
    records (dicts of every column), checked against the schema."""

    def __init__(self, path: Path, flush_every_s: float = 1.0):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.records: list[dict] = []
        self.flush_every_s = flush_every_s
        self._last_flush = 0.0

    def add(self, row: ResultRow) -> None:
        self.append(row)

    def append(self, row: "ResultRow | dict") -> None:
        if isinstance(row, ResultRow):
            record = row.to_record()
        else:
            missing = set(SCHEMA.names) - set(row)
            extra = set(row) - set(SCHEMA.names)
            if missing or extra:
                raise ValueError(f"result row: missing {sorted(missing)}, "
                                 f"unknown {sorted(extra)}")
            record = dict(row)
        self.records.append(record)
        if time.monotonic() - self._last_flush >= self.flush_every_s:
            self.flush()

    def flush(self) -> None:
        table = pa.Table.from_pylist(self.records, schema=SCHEMA)
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
    version = (table.schema.metadata or {}).get(rows.VERSION_KEY)
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
