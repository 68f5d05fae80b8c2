"""Results store: one parquet file per run, one row per (case, implementation).

The schema is derived from the typed row (suite/rows.py) and carries a version in its
metadata (asv's habit). A file of an older version is upgraded in memory by numbered
migration steps (`_MIGRATIONS`, one per version); a newer one is refused with a one-line
error, never misread. While a run writes, every row goes to an append-only journal beside
the parquet file as it finishes; the end of the run compacts it into the parquet file. A
crash, kill or Ctrl-C of the run keeps every finished row, and readers read the journal of
a run that did not finish.

A results file is data from anywhere (a nightly job's artifact): every reader checks the
version tag, the columns, their types and the values of the enum columns, and refuses
anything else with one line (SuiteInputError); nothing in a file is imported or called.
The journal's header and the parquet file's metadata also say how many items the run
planned and whether it finished (`completeness`), so that a report or a gate of a run
that stopped early says so.
"""

from __future__ import annotations

import enum
import json
import os
import platform
import socket
import subprocess
import tempfile
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable, Optional

import pyarrow as pa
import pyarrow.compute  # noqa: F401 - pa.compute
import pyarrow.parquet as pq

from bwd_suite.suite import rows
from bwd_suite.suite.errors import SuiteInputError
from bwd_suite.suite.outcomes import Determinism, FailureKind, Verdict
from bwd_suite.suite.rows import ResultRow, RunInfo

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


class RunState(enum.StrEnum):
    """How a results file's run ended."""

    COMPLETE = "complete"  # closed at the end of its plan (and every file before the tag)
    INTERRUPTED = "interrupted"  # stopped early (Ctrl-C, an exception) and compacted
    UNFINISHED = "unfinished"  # a journal without its parquet file: crashed, or still running


# parquet schema metadata beside the version: the items the run planned (absent: unknown)
# and how it ended (absent: complete, as every file written before these keys)
PLANNED_KEY = b"bwd_suite_planned_items"
FINISHED_KEY = b"bwd_suite_finished"
PLANNED_FIELD = PLANNED_KEY.decode()  # the same in a journal's header line


class ResultsWriter:
    """Writes a run's rows: each row is appended to a journal as it arrives (one JSON line,
    flushed to the OS), and `close` compacts the journal into the parquet file `path` and
    removes it. A crash or kill loses no finished row: `read_results` reads a journal whose
    parquet file was never written. Neither file may exist already (two runs never write
    the same file) unless `overwrite`. `planned`, the number of items the run means to
    write, goes into the journal's header and the parquet file's metadata, so that a
    reader can tell a short run from a small one (`completeness`).

    A driver sink (suite/driver.py): `add` takes typed rows; `append` also takes stored
    records (dicts of every column), checked against the schema."""

    def __init__(self, path: Path, overwrite: bool = False, planned: Optional[int] = None):
        if planned is not None and (isinstance(planned, bool) or not isinstance(planned, int)
                                    or planned < 0):
            raise ValueError(f"planned items: a count, not {planned!r}")
        self.path = Path(path)
        self.journal = journal_path(self.path)
        self.planned = planned
        check_writable(self.path, overwrite)
        self.records: list[dict] = []
        try:
            self._out = open(self.journal, "w" if overwrite else "x", encoding="utf-8")
        except OSError as e:  # the place was checked; a race or a file system that lies
            raise SuiteInputError(str(self.journal), f"cannot be written: "
                                                     f"{e.strerror or e}") from None
        head = {VERSION_FIELD: SCHEMA_VERSION}
        if planned is not None:
            head[PLANNED_FIELD] = planned
        self._out.write(json.dumps(head) + "\n")
        self._out.flush()
        self.closed = False

    def add(self, row: ResultRow) -> None:
        self.append(row)

    def append(self, row: "ResultRow | dict") -> None:
        if isinstance(row, ResultRow):
            record = storable_record(row)
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

    def close(self, interrupted: bool = False) -> None:
        """Compact: the parquet file under a temporary name, renamed, then the journal goes.
        `interrupted`: the run stopped before the end of its plan; the file says so."""
        if self.closed:
            return
        self._out.close()
        meta = dict(SCHEMA.metadata)
        meta[FINISHED_KEY] = (RunState.INTERRUPTED if interrupted else RunState.COMPLETE).encode()
        if self.planned is not None:
            meta[PLANNED_KEY] = str(self.planned).encode()
        table = pa.Table.from_pylist(self.records, schema=SCHEMA.with_metadata(meta))
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        pq.write_table(table, tmp)
        os.replace(tmp, self.path)
        self.journal.unlink()
        self.closed = True

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        # an exception out of the block stopped the run before its end
        self.close(interrupted=exc_type is not None)


VERSION_FIELD = rows.VERSION_KEY.decode()


def storable_record(row: ResultRow) -> dict:
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
    try:  # access() says yes to root on read-only and virtual file systems (/proc)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as e:
        raise SuiteInputError(flag, f"cannot write files in {folder}: "
                                    f"{e.strerror or e}") from None


def result_files(paths: Iterable) -> list[Path]:
    """Results files of the given paths: parquet files, and the journals of runs that did
    not finish (a journal beside its finished parquet file is left out)."""
    paths = list(paths)
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


def _shown(value, limit: int = 60) -> str:
    """A value from a file, quoted for a one-line error: repr escapes control characters."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())


def _version(raw, where: str) -> int:
    """The schema version tag (bytes of the parquet metadata, or the journal header's
    value) as an integer; anything else is no file of ours."""
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", "replace")
    if isinstance(raw, int) and not isinstance(raw, bool):
        return raw
    if isinstance(raw, str):
        try:
            return int(raw)
        except ValueError:
            pass
    raise SuiteInputError(where, f"the schema version tag {_shown(raw)} is not an integer: "
                                 f"not a bwd-suite results file")


def _planned(raw, where: str) -> Optional[int]:
    """The planned item count of a header or metadata: None (unknown) or a count."""
    if raw is None:
        return None
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", "replace")
    if isinstance(raw, str) and raw.strip().isdigit():
        raw = int(raw)
    if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 0:
        return raw
    raise SuiteInputError(where, f"the planned item count {_shown(raw)} is not a count")


def _run_state(metadata: Optional[dict], where: str) -> tuple:
    """(planned items or None, RunState) of a parquet file's metadata; a file without the
    keys is a complete run of an unknown plan (files written before they existed)."""
    metadata = metadata or {}
    raw = metadata.get(FINISHED_KEY)
    try:
        state = RunState.COMPLETE if raw is None else RunState(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        state = None
    if state not in (RunState.COMPLETE, RunState.INTERRUPTED):
        raise SuiteInputError(where, f"the finished tag {_shown(raw)} is not "
                                     f"{RunState.COMPLETE} or {RunState.INTERRUPTED}")
    return _planned(metadata.get(PLANNED_KEY), where), state


def _journal_header(path: Path, lines: list) -> dict:
    """The journal's first line: a JSON object holding the schema version."""
    try:
        head = json.loads(lines[0]) if lines else None
    except json.JSONDecodeError:
        head = None
    if not isinstance(head, dict) or VERSION_FIELD not in head:
        raise SuiteInputError(str(path), "not a bwd-suite results journal (its first line "
                                         "is no JSON object with a schema version)")
    return head


def _journal_records(path: Path, lines: list) -> list:
    """The journal's rows, each a JSON object of every column; a last line cut by a crash
    is dropped."""
    records = []
    for i, line in enumerate(lines[1:], 2):
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            if i == len(lines):  # only the line being written when the run died may be cut
                continue
            raise SuiteInputError(f"{path}, line {i}", "not a JSON row") from None
        if not isinstance(record, dict):
            raise SuiteInputError(f"{path}, line {i}", f"a JSON {type(record).__name__} "
                                                       f"where a row (an object) belongs")
        missing = [n for n in SCHEMA.names if n not in record]
        unknown = [n for n in record if n not in SCHEMA.names]
        if missing or unknown:
            raise SuiteInputError(f"{path}, line {i}", "not a row of this schema: "
                                  + "; ".join(f"{what} columns {_shown(cols, 120)}"
                                              for what, cols in (("missing", missing),
                                                                 ("unknown", unknown)) if cols))
        records.append(record)
    return records


def _read_journal(path: Path) -> tuple:
    """(header, table) of a journal, its rows checked against the current schema."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise SuiteInputError(str(path), f"not a readable results journal: "
                                         f"{_one_line(e)}") from None
    head = _journal_header(path, lines)
    version = _version(head[VERSION_FIELD], str(path))
    if version != SCHEMA_VERSION:
        raise SuiteInputError(str(path), f"a journal of schema version {version}: only "
                                         f"version {SCHEMA_VERSION} journals are read")
    _planned(head.get(PLANNED_FIELD), str(path))
    records = _journal_records(path, lines)
    try:
        table = pa.Table.from_pylist(records, schema=SCHEMA)
    except (pa.ArrowException, TypeError, ValueError) as e:
        raise SuiteInputError(str(path), f"rows do not match the schema: "
                                         f"{_one_line(e)}") from None
    _check_values(table, str(path))
    return head, table


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


def _v8_to_v9(table: pa.Table) -> pa.Table:
    """Version 9 added an item's captured output and the host's load while it was timed;
    older rows have neither (null)."""
    return _add_null_columns(table, ("output", "host_load"))


def _v9_to_v10(table: pa.Table) -> pa.Table:
    """Version 10 added the compute roofline (TFLOP/s against the measured GEMM peak), the
    memory ledger's saved bytes and bounds, and batch invariance; older rows have none
    (null): their `bound` was decided against the datasheet fp32 rate."""
    return _add_null_columns(table, ("tflops", "peak_tflops", "frac_peak_flops",
                                     "saved_bytes", "memory_bounds_json", "batch_invariant"))


def _v10_to_v11(table: pa.Table) -> pa.Table:
    """Version 11 records where an outside implementation was loaded from; older rows have
    none (null: a plain callable's name is its `module:object` still)."""
    return _add_null_columns(table, ("impl_origin",))


def _v11_to_v12(table: pa.Table) -> pa.Table:
    """Version 12 records what an implementation reported about its item (suite/facts.py)
    and the training-step scenarios' stages and memory ledger; older rows have none of them
    (null). It also added the verdict `weak_yardstick`, which no older row holds (an older
    yardstick's item passed by its name there, and stays as recorded)."""
    return _add_null_columns(table, ("impl_facts_json", "stages_json", "ledger_json"))


# version N -> the step that turns a version-N table into version N+1
_MIGRATIONS = {1: _v1_to_v2, 2: _v2_to_v3, 3: _v3_to_v4, 4: _v4_to_v5, 5: _v5_to_v6,
               6: _v6_to_v7, 7: _v7_to_v8, 8: _v8_to_v9, 9: _v9_to_v10, 10: _v10_to_v11,
               11: _v11_to_v12}


def _kind(t: pa.DataType) -> str:
    """The family of an Arrow type, for telling a column of another type from one of
    another width or string flavour (int32 for int64, large_string for string)."""
    if pa.types.is_null(t):
        return "null"
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        return "number"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return "list of " + _kind(t.value_type)
    if pa.types.is_struct(t):
        return "struct"
    return str(t)


def _check_types(table: pa.Table, where: str) -> None:
    """Every column of the family the schema declares (a null column fits any): a cast
    would turn a number into text and text of digits into a number without a word."""
    for f in SCHEMA:
        have = table.schema.field(f.name).type
        if _kind(have) not in ("null", _kind(f.type)):
            raise SuiteInputError(where, f"column {f.name!r} is {have}, not {f.type}")


# enum column -> (its values, whether null is allowed); null determinism reads as not_checked
_ENUM_COLUMNS = {"verdict": (Verdict, False), "failure_kind": (FailureKind, True),
                 "determinism": (Determinism, True)}


def _check_values(table: pa.Table, where: str) -> None:
    """The enum columns hold their enum's values only (verdict never null): a report or a
    gate must not count a verdict it does not know. The saved bytes are not negative, and
    the memory bounds are what OpSpec.memory_bounds_json writes (the report reads both)."""
    for name, (kind, nullable) in _ENUM_COLUMNS.items():
        values = set(table.column(name).unique().to_pylist())
        bad = sorted((values - {m.value for m in kind} - ({None} if nullable else set())),
                     key=repr)
        if bad:
            raise SuiteInputError(where, f"column {name!r} holds {_shown(bad[0])}, not one of "
                                         f"{', '.join(m.value for m in kind)}"
                                         + ("" if nullable else " (never null)"))
    for name in _BYTE_COLUMNS:
        low = pa.compute.min(table.column(name)).as_py() if table.num_rows else None
        if low is not None and low < 0:
            raise SuiteInputError(where, f"column {name!r} holds {low}, a negative byte count")
    for text in table.column("memory_bounds_json").unique().to_pylist():
        if text is not None and not _bounds_object(text):
            raise SuiteInputError(where, f"column 'memory_bounds_json' holds {_shown(text)}, "
                                         f"not a JSON object of byte counts or an error")


# columns of byte counts checked not to be negative (the memory ledger divides them)
_BYTE_COLUMNS = ("saved_bytes",)


def _bounds_object(text: str) -> bool:
    """Whether `text` is what OpSpec.memory_bounds_json writes: a JSON object of
    non-negative numbers, or {"error": text}."""
    try:
        value = json.loads(text)
    except ValueError:
        return False
    if not isinstance(value, dict):
        return False
    if set(value) == {"error"}:
        return isinstance(value["error"], str)
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0
               for v in value.values())


def _read_parquet(path: Path) -> pa.Table:
    """A parquet file as written, its metadata checked; any failure to read it is one line."""
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException, ValueError) as e:
        raise SuiteInputError(str(path), f"not a readable parquet file: "
                                         f"{_one_line(e)}") from None
    if rows.VERSION_KEY not in (table.schema.metadata or {}):
        raise SuiteInputError(str(path), "not a bwd-suite results file (no schema version)")
    _run_state(table.schema.metadata, str(path))
    return table


def read_table(path: Path) -> pa.Table:
    """One results file (parquet, or the journal of an unfinished run) as a table of the
    current schema (older versions upgraded), its columns, types and enum values checked."""
    path = Path(path)
    if path.name.endswith(JOURNAL_SUFFIX):
        return _read_journal(path)[1]
    table = _read_parquet(path)
    version = _version(table.schema.metadata[rows.VERSION_KEY], str(path))
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
        except (pa.ArrowException, TypeError, ValueError) as e:
            raise SuiteInputError(str(path), f"schema version {version} that cannot be "
                                             f"upgraded: {_one_line(e)}") from None
    missing = [n for n in SCHEMA.names if n not in table.column_names]
    if missing:
        raise SuiteInputError(str(path), f"schema version {version} but the columns "
                                         f"{missing} are missing")
    unknown = [n for n in table.column_names if n not in SCHEMA.names]
    if unknown:
        raise SuiteInputError(str(path), f"schema version {version} with unknown columns "
                                         f"{_shown(unknown, 120)}")
    _check_types(table, str(path))
    # the current column order, types and metadata, so that files of any version concat
    try:
        table = table.select(SCHEMA.names).cast(SCHEMA)
    except (pa.ArrowException, TypeError, ValueError) as e:
        raise SuiteInputError(str(path), f"columns of the wrong type: {_one_line(e)}") from None
    _check_values(table, str(path))
    return table


def read_results(paths: Iterable, columns: Optional[list] = None):
    """All rows of the given files or folders as one pandas DataFrame."""
    tables = [read_table(f) for f in result_files(paths)]
    table = pa.concat_tables(tables)
    if columns:
        table = table.select(columns)
    return table.to_pandas()


@dataclass(frozen=True)
class Completeness:
    """How much of its plan one results file holds."""

    path: Path
    rows: int
    planned: Optional[int]  # None: the writer was not told (files before the key, pytest)
    state: RunState

    @property
    def incomplete(self) -> bool:
        """The run stopped early, or wrote fewer items than it planned: what is missing is
        not known to pass."""
        return self.state is not RunState.COMPLETE or (
            self.planned is not None and self.rows < self.planned)

    def _count(self) -> str:
        if self.planned is None:
            return f"{self.rows} items, plan unknown"
        return f"{self.rows} of {self.planned} planned items"

    def describe(self) -> str:
        """One line, e.g. "r.parquet.journal: an unfinished run (no parquet file; 2 of 18
        planned items)"."""
        if self.state is RunState.UNFINISHED:
            what = f"an unfinished run (no parquet file; {self._count()})"
        elif self.state is RunState.INTERRUPTED:
            what = f"an interrupted run ({self._count()})"
        elif self.incomplete:
            what = f"a run with fewer items than planned ({self._count()})"
        else:
            what = f"a complete run ({self._count()})"
        return f"{self.path}: {what}"


def completeness(paths: Iterable) -> list[Completeness]:
    """Per results file of `paths` (as `read_results` finds them): its rows, its planned
    item count and how its run ended. A journal read alone is a run that never compacted:
    it crashed or is still running."""
    out = []
    for f in result_files(paths):
        if f.name.endswith(JOURNAL_SUFFIX):
            head, table = _read_journal(f)
            out.append(Completeness(f, table.num_rows, _planned(head.get(PLANNED_FIELD), str(f)),
                                    RunState.UNFINISHED))
            continue
        try:
            meta = pq.ParquetFile(f)
            n, metadata = meta.metadata.num_rows, meta.schema_arrow.metadata
        except (OSError, pa.ArrowException, ValueError) as e:
            raise SuiteInputError(str(f), f"not a readable parquet file: "
                                          f"{_one_line(e)}") from None
        planned, state = _run_state(metadata, str(f))
        out.append(Completeness(f, n, planned, state))
    return out
