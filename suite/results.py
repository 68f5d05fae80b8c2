"""Results store: one parquet file per run, one row per (case, implementation).

The schema is derived from the typed row (suite/rows.py) and carries a version in its
metadata (asv's habit). A file of an older version is upgraded in memory by numbered
migration steps (`_MIGRATIONS`, one per version); a newer one is refused with a one-line
error, never misread. While a run writes, every row goes to an append-only journal beside
the parquet file as it finishes; the end of the run compacts it into the parquet file. A
crash, kill or Ctrl-C of the run keeps every finished row, and readers read the journal of
a run that did not finish.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable, Optional

import pyarrow as pa
import pyarrow.parquet as pq

from suite import rows
from suite.errors import SuiteInputError
from suite.outcomes import FailureKind, Verdict
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


JOURNAL_SUFFIX = ".journal"  # X.parquet.journal: the rows of X.parquet while it is written


def journal_path(path: Path) -> Path:
    return Path(path).with_name(Path(path).name + JOURNAL_SUFFIX)


class ResultsWriter:
    """Writes a run's rows: each row is appended to a journal as it arrives (one JSON line,
    flushed to the OS), and `close` compacts the journal into the parquet file `path` and
    removes it. A crash or kill loses no finished row: `read_results` reads a journal whose
    parquet file was never written. Neither file may exist already (two runs never write
    the same file) unless `overwrite`.

    A driver sink (suite/driver.py): `add` takes typed rows; `append` also takes stored
    records (dicts of every column), checked against the schema."""

    def __init__(self, path: Path, overwrite: bool = False):
        self.path = Path(path)
        self.journal = journal_path(self.path)
        check_writable(self.path, overwrite)
        self.records: list[dict] = []
        self._out = open(self.journal, "w" if overwrite else "x", encoding="utf-8")
        self._out.write(json.dumps({VERSION_FIELD: SCHEMA_VERSION}) + "\n")
        self._out.flush()
        self.closed = False

    def add(self, row: ResultRow) -> None:
        self.append(row)

    def append(self, row: "ResultRow | dict") -> None:
        if isinstance(row, ResultRow):
            record = _storable(row)
        else:
            missing = set(SCHEMA.names) - set(row)
            extra = set(row) - set(SCHEMA.names)
            if missing or extra:
                raise ValueError(f"result row: missing {sorted(missing)}, "
                                 f"unknown {sorted(extra)}")
            record = dict(row)
        self.records.append(record)
        self._out.write(json.dumps(record) + "\n")
        self._out.flush()

    def close(self) -> None:
        """Compact: the parquet file under a temporary name, renamed, then the journal goes."""
        if self.closed:
            return
        self._out.close()
        table = pa.Table.from_pylist(self.records, schema=SCHEMA)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        pq.write_table(table, tmp)
        os.replace(tmp, self.path)
        self.journal.unlink()
        self.closed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


VERSION_FIELD = rows.VERSION_KEY.decode()


def _storable(row: ResultRow) -> dict:
    """The row's record, or, when some value does not fit the schema or JSON, an error row
    of the same item saying so: the item's row is never lost to a bad value."""
    record = row.to_record()
    try:
        json.dumps(record)
        pa.Table.from_pylist([record], schema=SCHEMA)
        return record
    except (TypeError, ValueError, OverflowError, pa.ArrowException) as e:
        keep = {f: record[f] for f in SCHEMA.names[:SCHEMA.get_field_index("impl_version") + 1]}
        bad = ResultRow(**{k: v for k, v in keep.items() if k != "tags"},
                        tags=list(record.get("tags") or []))
        bad.finish(Verdict.ERROR, f"the row could not be stored ({type(e).__name__}: {e}); "
                                  f"its verdict was {record.get('verdict')}: "
                                  f"{record.get('reason', '')[:300]}",
                   FailureKind.EXCEPTION, duration_s=record.get("duration_s"))
        return bad.to_record()


def check_writable(path: Path, overwrite: bool = False, flag: str = "--output") -> None:
    """Refuse, before any work, a results path that exists (unless `overwrite`) or whose
    folder cannot be created or written."""
    path = Path(path)
    for p in (path, journal_path(path)):
        if p.exists() and not overwrite:
            raise SuiteInputError(flag, f"{p} exists (another run's results); choose another "
                                        f"path or pass --force to replace it")
    check_folder(path.parent, flag)


def check_folder(folder: Path, flag: str = "--out") -> None:
    """The folder exists or can be made, and is writable."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise SuiteInputError(flag, f"{folder} is not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise SuiteInputError(flag, f"cannot create the folder {folder}: "
                                    f"{e.strerror or e}") from None
    if not os.access(folder, os.W_OK):
        raise SuiteInputError(flag, f"the folder {folder} is not writable")


def _files(paths: Iterable) -> list[Path]:
    """Results files of the given paths: parquet files, and the journals of runs that did
    not finish (a journal beside its finished parquet file is left out)."""
    files = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(p.rglob("*.parquet")) + sorted(p.rglob("*.parquet" + JOURNAL_SUFFIX))
            files += [f for f in found
                      if not (f.name.endswith(JOURNAL_SUFFIX)
                              and f.with_name(f.name[:-len(JOURNAL_SUFFIX)]).exists())]
        elif p.exists():
            files.append(p)
        elif journal_path(p).exists():
            files.append(journal_path(p))
        else:
            raise SuiteInputError(str(p), "no such results file or folder")
    if not files:
        raise SuiteInputError(", ".join(map(str, paths)), "holds no .parquet results")
    return files


def _read_journal(path: Path) -> pa.Table:
    """A journal's rows as a table of its version; a last line cut by a crash is dropped."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise SuiteInputError(str(path), f"not a readable results journal: {e}") from None
    try:
        head = json.loads(lines[0]) if lines else {}
    except json.JSONDecodeError:
        head = {}
    if VERSION_FIELD not in head:
        raise SuiteInputError(str(path), "not a bwd-suite results journal (no schema version)")
    records = []
    for i, line in enumerate(lines[1:], 2):
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            if i != len(lines):  # only the line being written when the run died may be cut
                raise SuiteInputError(f"{path}, line {i}", "not a JSON row") from None
    version = int(head[VERSION_FIELD])
    if version != SCHEMA_VERSION:
        raise SuiteInputError(str(path), f"a journal of schema version {version}: only "
                                         f"version {SCHEMA_VERSION} journals are read")
    try:
        return pa.Table.from_pylist(records, schema=SCHEMA)
    except (pa.ArrowInvalid, pa.ArrowTypeError, KeyError) as e:
        raise SuiteInputError(str(path), f"rows do not match the schema: {e}") from None


def _add_null_columns(table: pa.Table, names: Iterable[str]) -> pa.Table:
    for name in (n for n in names if n not in table.column_names):
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


def _v5_to_v6(table: pa.Table) -> pa.Table:
    """Version 6 records each row's declared known failure; older rows declare none."""
    return _add_null_columns(table, ("known_failure",))


def _v6_to_v7(table: pa.Table) -> pa.Table:
    """Version 7 notes a yardstick weaker than fp32 with one rounding; none before."""
    return _add_null_columns(table, ("yardstick_note",))


def _v7_to_v8(table: pa.Table) -> pa.Table:
    """Version 8 added the op's statistics, the wall time and the kernel launches of a call;
    older rows have none (null)."""
    return _add_null_columns(table, ("stats_json", "wall_median_ms", "launches"))


# version N -> the step that turns a version-N table into version N+1
_MIGRATIONS = {1: _v1_to_v2, 2: _v2_to_v3, 3: _v3_to_v4, 4: _v4_to_v5, 5: _v5_to_v6,
               6: _v6_to_v7, 7: _v7_to_v8}


def read_table(path: Path) -> pa.Table:
    """One results file (parquet, or the journal of an unfinished run) as a table of the
    current schema (older versions upgraded)."""
    path = Path(path)
    if path.name.endswith(JOURNAL_SUFFIX):
        return _read_journal(path)
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
    for step in range(version, SCHEMA_VERSION):
        if step not in _MIGRATIONS:
            raise SuiteInputError(str(path), f"schema version {version} cannot be upgraded "
                                             f"to version {SCHEMA_VERSION}")
        try:
            table = _MIGRATIONS[step](table)
        except KeyError as e:
            raise SuiteInputError(str(path), f"schema version {version} without its column "
                                             f"{e}") from None
    missing = [n for n in SCHEMA.names if n not in table.column_names]
    if missing:
        raise SuiteInputError(str(path), f"schema version {version} but the columns "
                                         f"{missing} are missing")
    # the current column order, types and metadata, so that files of any version concat
    try:
        return table.select(SCHEMA.names).cast(SCHEMA)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise SuiteInputError(str(path), f"columns of the wrong type: {e}") from None


def read_results(paths: Iterable, columns: Optional[list] = None):
    """All rows of the given files or folders as one pandas DataFrame."""
    tables = [read_table(f) for f in _files(paths)]
    table = pa.concat_tables(tables)
    if columns:
        table = table.select(columns)
    return table.to_pandas()
