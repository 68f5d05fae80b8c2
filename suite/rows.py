"""One result row per (run, case, implementation), typed: the only place a column is
declared.

`ResultRow` is a dataclass whose fields are the results file's columns, in file order,
each with its Arrow type; `SCHEMA` (the parquet schema) is derived from it. Verdict,
failure kind and determinism are enums here and become strings only in `to_record`, at
the parquet writer; `from_record` turns a stored record back into a row. Adding a column:
a field here, a migration step in suite/results.py, a line in docs/results-schema.md.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

import pyarrow as pa

from bwd_suite.suite.outcomes import Determinism, FailureKind, Verdict

SCHEMA_VERSION = 12
VERSION_KEY = b"bwd_suite_schema_version"

OUTPUT_STRUCT = pa.struct([
    ("name", pa.string()), ("tol_class", pa.string()), ("numel", pa.int64()),
    ("scale", pa.float64()), ("err", pa.float64()), ("ref_err", pa.float64()),
    ("cond_err", pa.float64()), ("allowed", pa.float64()), ("max_abs", pa.float64()),
    ("max_rel", pa.float64()), ("rel_l2", pa.float64()), ("n_bad", pa.int64()),
    ("n_nonfinite", pa.int64()), ("n_unwritten", pa.int64()), ("worst_index", pa.string()),
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

_ENUMS = {"verdict": Verdict, "failure_kind": FailureKind, "determinism": Determinism}
# a row's reason at most: every row of a run, the summary and the report repeat it
MAX_REASON_CHARS = 8000


def clip(text: str, limit: int = MAX_REASON_CHARS) -> str:
    """`text`, or its head and tail with how much was cut between them."""
    text = str(text)
    if len(text) <= limit:
        return text
    tail = limit // 4
    cut = len(text) - (limit - tail)
    return f"{text[:limit - tail]} [... {cut} characters cut ...] {text[-tail:]}"


def _col(arrow: pa.DataType, default: Any = None) -> Any:
    """A column: its Arrow type, and the value of a row that never set it."""
    if isinstance(default, list):
        return field(default_factory=list, metadata={"arrow": arrow})
    return field(default=default, metadata={"arrow": arrow})


_str, _i64, _i32, _f64, _bool = pa.string(), pa.int64(), pa.int32(), pa.float64(), pa.bool_()


@dataclass(frozen=True)
class RunInfo:
    """The run-level columns: the same on every row of a run, captured once."""

    run_id: str = ""
    run_started: str = ""
    git_commit: str = ""
    host: str = ""
    device: str = ""
    device_name: str = ""
    driver: str = ""
    torch_version: str = ""
    cuda_version: str = ""
    python_version: str = ""
    profile: str = ""


@dataclass(slots=True)
class ResultRow:
    # --- run and environment (RunInfo's fields) ---
    run_id: str = _col(_str, "")
    run_started: str = _col(_str, "")
    git_commit: str = _col(_str, "")
    host: str = _col(_str, "")
    device: str = _col(_str, "")
    device_name: str = _col(_str, "")
    driver: str = _col(_str, "")
    torch_version: str = _col(_str, "")
    cuda_version: str = _col(_str, "")
    python_version: str = _col(_str, "")
    profile: str = _col(_str, "")
    # --- case ---
    op: str = _col(_str, "")
    case_id: str = _col(_str, "")
    case_group: str = _col(_str, "")
    case_file: str = _col(_str, "")
    tags: list = _col(pa.list_(_str), [])
    params_json: str = _col(_str, "{}")
    seed: Optional[int] = _col(_i64)
    # --- implementation ---
    impl: str = _col(_str, "")
    impl_kind: str = _col(_str, "")
    # what loads an implementation from outside the registry, `op=module:object` (the
    # --impl of a rerun: the name of a decorated one says nothing of its module); null for
    # registered ones (added in version 11)
    impl_origin: Optional[str] = _col(_str)
    impl_version: str = _col(_str, "")
    # --- verdict ---
    verdict: Optional[Verdict] = _col(_str)
    failure_kind: Optional[FailureKind] = _col(_str)
    reason: str = _col(_str, "")
    # why the implementation declares it fails this case (Implementation.known_failures);
    # null when it declares nothing (added in version 6)
    known_failure: Optional[str] = _col(_str)
    # the outputs on which the case's yardstick was worse than fp32 with one rounding, so
    # that the bound used the fp32 error instead (suite/tolerances.py); null otherwise
    # (added in version 7)
    yardstick_note: Optional[str] = _col(_str)
    outputs: list = _col(pa.list_(OUTPUT_STRUCT), [])  # suite.verdicts.OutputCheck.as_row
    # the tail of what the item wrote on stdout and stderr in its worker process (capped:
    # suite.worker_log.OUTPUT_TAIL_CHARS); null when it wrote nothing or ran without workers
    # (added in version 9)
    output: Optional[str] = _col(_str)
    # the op's statistics of the item as a JSON object (OpSpec.case_stats), {"error": ...}
    # when they raised; null where the op declares none (added in version 8)
    stats_json: Optional[str] = _col(_str)
    # what the implementation reported about the item (suite/facts.py: the kernel, epilogue
    # or algorithm a library picked) as a JSON object; null where it reported nothing
    # (added in version 12)
    impl_facts_json: Optional[str] = _col(_str)
    # --- diagnosis of failing items (null / empty on the others) ---
    diagnosis: Optional[str] = _col(_str)
    diagnosis_cause: Optional[str] = _col(_str)
    error_locations: list = _col(pa.list_(LOCATION_STRUCT), [])
    error_terms: list = _col(pa.list_(TERM_STRUCT), [])
    # --- determinism over repeated calls ---
    determinism: Determinism = _col(_str, Determinism.NOT_CHECKED)
    det_repeats: int = _col(_i32, 0)
    det_spread: Optional[float] = _col(_f64)
    # the same sequences reordered (OpSpec.batch_variant) gave bitwise the same outputs;
    # None: not checked (the op declares no reordering, or the case has one sequence)
    batch_invariant: Optional[bool] = _col(_bool)
    # --- timing (suite.timing) ---
    timing_method: Optional[str] = _col(_str)
    time_samples_s: list = _col(pa.list_(_f64), [])
    time_median_s: Optional[float] = _col(_f64)
    time_iqr_s: Optional[float] = _col(_f64)
    time_warmup: Optional[int] = _col(_i32)
    l2_flush: Optional[str] = _col(_str)  # suite.timing.L2_FLUSH_MODES
    timing_pacing: Optional[str] = _col(_str)  # null off CUDA
    # share of the host's cores busy with other processes while the samples were taken
    # (suite/host_load.py); null where it could not be read (added in version 9)
    host_load: Optional[float] = _col(_f64)
    # host time of one call until its device work is done, as a training loop sees it
    # (suite.timing.wall_time); kernels one call launches (suite/launches.py), null off
    # CUDA (both added in version 8)
    wall_median_ms: Optional[float] = _col(_f64)
    launches: Optional[int] = _col(_i64)
    # --- roofline (suite.roofline) ---
    bytes: Optional[int] = _col(_i64)
    flops: Optional[int] = _col(_i64)
    gbps: Optional[float] = _col(_f64)
    copy_gbps: Optional[float] = _col(_f64)
    frac_copy_bw: Optional[float] = _col(_f64)
    same_copy_s: Optional[float] = _col(_f64)  # a device copy of the same bytes, timed alike
    frac_same_copy: Optional[float] = _col(_f64)
    arith_intensity: Optional[float] = _col(_f64)
    bound: Optional[str] = _col(_str)  # against the ridge point of the case's dtype
    # flops / median time (1e12 a second); the case dtype's compute ceiling, a measured
    # GEMM rate (suite.roofline.Ceilings.compute_peak); their ratio (added in version 10)
    tflops: Optional[float] = _col(_f64)
    peak_tflops: Optional[float] = _col(_f64)
    frac_peak_flops: Optional[float] = _col(_f64)
    # --- memory ledger ---
    peak_mem_bytes: Optional[int] = _col(_i64)
    # bytes the implementation's untimed forward saved for its backward; null where it
    # has no such forward (added in version 10)
    saved_bytes: Optional[int] = _col(_i64)
    # the op's analytic lower bounds of the backward's temporary memory as a JSON object
    # {name: bytes} (OpSpec.memory_bounds), {"error": ...} when they raised; null where
    # the op declares none or the item was not timed (added in version 10)
    memory_bounds_json: Optional[str] = _col(_str)
    # --- training-step scenarios (suite/step/; null on the ops' rows; added in version 12) ---
    # per stage (forward, loss, backward, optimizer) its median time, exact FLOPs and
    # kernel launches, as a JSON object (suite/step/stages.py)
    stages_json: Optional[str] = _col(_str)
    # the step's memory by state class, measured and modelled, as a JSON object
    # (suite/step/ledger.py)
    ledger_json: Optional[str] = _col(_str)
    duration_s: Optional[float] = _col(_f64)

    @classmethod
    def start(cls, run: Optional[RunInfo], **columns) -> "ResultRow":
        """A row of `run` (None: no run-level columns, as in pytest) with `columns` set."""
        base = dataclasses.asdict(run) if run is not None else {}
        return cls(**base, **columns)

    def finish(self, verdict: Verdict, reason: str = "",
               failure_kind: Optional[FailureKind] = None, duration_s: Optional[float] = None
               ) -> "ResultRow":
        """Set the outcome (and the item's wall time, when given); returns the row. A reason
        longer than MAX_REASON_CHARS (an exception carrying megabytes) keeps its head and
        tail."""
        self.verdict, self.reason, self.failure_kind = verdict, clip(reason), failure_kind
        if duration_s is not None:
            self.duration_s = duration_s
        return self

    @property
    def expected(self) -> bool:
        """A failure the implementation declares (known_failure): not the run's fault."""
        return bool(self.known_failure) and self.verdict is not None and self.verdict.bad

    @property
    def unexpected_pass(self) -> bool:
        """Declared to fail, and passed: the declaration is out of date (strict xfail)."""
        return bool(self.known_failure) and self.verdict is Verdict.PASS

    @property
    def counts_against(self) -> bool:
        """Makes a run exit 1: an undeclared failure, error or timeout, or an unexpected
        pass."""
        return (self.verdict is not None and self.verdict.bad and not self.expected) \
            or self.unexpected_pass

    @property
    def params(self) -> dict:
        return json.loads(self.params_json)

    def to_record(self) -> dict:
        """The row as the parquet writer stores it: enums as their string values."""
        rec = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        for name in _ENUMS:
            if rec[name] is not None:
                rec[name] = rec[name].value
        return rec

    @classmethod
    def from_record(cls, record: Mapping) -> "ResultRow":
        """A stored record (a dict of `read_results(...).to_dict("records")`, or of
        `to_record`) as a typed row: strings to enums, arrays to lists, NaN to None."""
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: _plain(v) for k, v in record.items() if k in known}
        for name, kind in _ENUMS.items():
            if values.get(name) is not None:
                values[name] = kind(values[name])
        if values.get("determinism") is None:
            values.pop("determinism", None)
        return cls(**values)


def _plain(v: Any) -> Any:
    """A pandas/pyarrow column value as a plain Python one: arrays to lists, a null float
    (NaN in a pandas frame) to None. Values inside lists keep NaN: there it is data."""
    if hasattr(v, "tolist") and not isinstance(v, (str, bytes)):
        v = v.tolist()
    if isinstance(v, float) and math.isnan(v):
        return None
    if isinstance(v, list):
        return [{k: _scalar(y) for k, y in x.items()} if isinstance(x, dict) else _scalar(x)
                for x in v]
    return _scalar(v)


def _scalar(v: Any) -> Any:
    return v.item() if hasattr(v, "item") and not isinstance(v, (str, bytes)) else v


def columns() -> list[str]:
    return [f.name for f in dataclasses.fields(ResultRow)]


SCHEMA = pa.schema([(f.name, f.metadata["arrow"]) for f in dataclasses.fields(ResultRow)],
                   metadata={VERSION_KEY: str(SCHEMA_VERSION).encode()})

assert [f.name for f in dataclasses.fields(RunInfo)] == columns()[:len(
    dataclasses.fields(RunInfo))], "RunInfo's fields must lead ResultRow's, in order"
