"""The command that reruns one item alone, built from its results row: the one place that
every output showing a failure (run's summary, compare's formats, the report's page,
pytest's failure message) takes it from.

    python -m bwd_suite run [--cases FILE] --case 'ID$' --impl IMPL --device DEV
        --profile P [--repeats R] [--no-timing]

What makes it the same item:

- the case: its whole id and `$` (suite.selection.id_matches: that case, never the ids
  that extend it). The package's own case files (recorded relative to its cases/) are
  found by default, from any folder; another file is named by `--cases` as the run
  recorded it (relative to the folder that run started in). The inputs and their seed
  derive from the case id and its file, so the same case gets the same inputs;
- the profile: the recorded one when the case is tagged for it, else the first the case
  is tagged for (a `--rerun-failed` run records "rerun");
- the implementation: a registered name, or the `op=module:object` an outside one was
  loaded from (`impl_origin`; a plain callable's name is its `module:object`);
- the device; the determinism repeats where they were not run's default; `--no-timing`
  where the row shows it was checked untimed (a failing or passing item is timed when
  timing is on; an error's row cannot tell, so its command times: an error raised while
  being timed needs it).

Rows of drawn cases (`fuzz`, whose case file is "fuzz": it prints each failure's
case-file block instead) have no command. Nothing here imports torch: the reports use it.
"""

from __future__ import annotations

import functools
import math
import shlex
from pathlib import Path
from typing import Iterable, Mapping, Optional

from bwd_suite.suite.profiles import CASES_DIR, PROFILES, STEP_KIND, profile_tags

RUN = ("python", "-m", "bwd_suite", "run")
STEP = ("python", "-m", "bwd_suite", "step")  # a training-step scenario's row (suite/step/)
DEFAULT_REPEATS = 3  # run's --repeats (suite/commands/run.py)
# a run with timing times the items of these verdicts: such a row without a timing was
# checked untimed
UNTIMED_VERDICTS = ("fail", "pass", "weak_yardstick")


def _value(row, name: str, columns: Mapping):
    """A column of `row` (a ResultRow, a pandas row or a mapping), `columns` first; None
    where missing or null (NaN, pandas' NA)."""
    if name in columns:
        v = columns[name]
    elif isinstance(row, Mapping):
        v = row.get(name)
    else:
        v = getattr(row, name, None)
    if isinstance(v, float) and math.isnan(v):  # numpy's floats too
        return None
    return None if type(v).__name__ in ("NAType", "NaTType") else v


def _text(row, name: str, columns: Mapping) -> str:
    v = _value(row, name, columns)
    return "" if v is None else str(v)


def profile_of(recorded: str, tags: Iterable) -> Optional[str]:
    """The profile that selects a case: the recorded one where the case is tagged for it
    (or the case's tags are unknown), else the first the case is tagged for; None when
    neither is a profile."""
    tags = {str(t) for t in tags}
    if recorded in PROFILES and (not tags or tags & profile_tags(recorded)):
        return recorded
    return next((p for p in PROFILES if tags & profile_tags(p)), None)


@functools.lru_cache(maxsize=4096)
def case_file_arg(recorded: str) -> Optional[str]:
    """`--cases`'s value for a recorded case file: None for one of the package's (found by
    default from any folder)."""
    path = Path(recorded)
    if not path.is_absolute() and (CASES_DIR / path).is_file():
        return None
    return recorded


def impl_arg(op: str, impl: str, origin: str = "") -> str:
    """`--impl`'s value: a registered name, or where an outside one was loaded from."""
    if origin:
        return origin
    return f"{op}={impl}" if ":" in impl else impl


def rerun_command(row, **columns) -> Optional[str]:
    """The shell command that reruns the item of `row` alone, or None for a row without a
    case file of its own (fuzz's drawn cases). `columns` stand in for the row's columns
    (pytest's items record no run-level ones: their device and profile)."""
    op, case_id, impl = (_text(row, k, columns) for k in ("op", "case_id", "impl"))
    recorded = _text(row, "case_file", columns)
    if not (op and case_id and impl) or not recorded.endswith(".toml"):
        return None
    if op == STEP_KIND:
        return _step_command(row, case_id, impl, recorded, columns)
    words = list(RUN)
    cases = case_file_arg(recorded)
    if cases:
        words += ["--cases", cases]
    words += ["--case", f"{case_id}$",
              "--impl", impl_arg(op, impl, _text(row, "impl_origin", columns))]
    words += _device_and_profile(row, columns)
    repeats = _value(row, "det_repeats", columns)
    if repeats and int(repeats) != DEFAULT_REPEATS:
        words += ["--repeats", str(int(repeats))]
    if _text(row, "verdict", columns) in UNTIMED_VERDICTS \
            and not _text(row, "timing_method", columns):
        words.append("--no-timing")
    return shlex.join(words)


def _device_and_profile(row, columns: Mapping) -> list:
    """`--device D --profile P` as the row recorded them (each only where known)."""
    words = []
    device = _text(row, "device", columns)
    if device:
        words += ["--device", device]
    tags = _value(row, "tags", columns)
    profile = profile_of(_text(row, "profile", columns), [] if tags is None else tags)
    if profile:
        words += ["--profile", profile]
    return words


def _step_command(row, case_id: str, impl: str, recorded: str, columns: Mapping) -> str:
    """`step --scenario ID$ --impl SET`: a scenario's check reruns with the scenario (its
    checks run together; their runs step in lockstep)."""
    words = list(STEP)
    cases = case_file_arg(recorded)
    if cases:
        words += ["--cases", cases]
    words += ["--scenario", case_id.rpartition("/")[0] + "$", "--impl",
              _text(row, "impl_origin", columns) or impl]
    words += _device_and_profile(row, columns)
    return shlex.join(words)


def rerun_failed_command(results, *, device: str = "", cases: Iterable = (),
                         origins: Iterable[str] = (), repeats: Optional[int] = None,
                         timing: bool = True) -> str:
    """`run --rerun-failed RESULTS...` (`results`: a path or several) with what that run's
    items need again: its case files (`cases`, when not the package's), the outside
    implementations that failed (by their origins: a results file never makes the suite
    import code), the device, the repeats and the timing."""
    paths = [results] if isinstance(results, (str, Path)) else list(results)
    words = [*RUN, "--rerun-failed", *map(str, paths)]
    for c in cases:
        words += ["--cases", str(c)]
    origins = sorted(set(origins))
    if origins:
        words += ["--impl", ",".join(origins)]
    if device:
        words += ["--device", device]
    if repeats is not None and repeats != DEFAULT_REPEATS:
        words += ["--repeats", str(repeats)]
    if not timing:
        words.append("--no-timing")
    return shlex.join(words)


def rerun_failed_of(results, rows: list) -> Optional[str]:
    """rerun_failed_command for results read back (`summary`): what the run was given,
    read off its rows (the latest of each item); None when nothing counts against them."""
    failing = [r for r in rows if r.counts_against and r.op != STEP_KIND]
    if not failing:  # a scenario's rows each name their own `step` command
        return None
    files = {case_file_arg(r.case_file) for r in failing if r.case_file.endswith(".toml")}
    cases = sorted(f for f in files if f)
    if cases and None in files:  # the package's cases too: --cases replaces the default
        cases.append(str(CASES_DIR))
    devices = sorted({r.device for r in rows if r.device})
    device = devices[0] if len(devices) == 1 else \
        ("cuda" if devices and all(d.startswith("cuda") for d in devices) else "")
    repeats = sorted((r.det_repeats for r in rows if r.det_repeats),
                     key=[r.det_repeats for r in rows].count)
    return rerun_failed_command(results, device=device, cases=cases,
                                origins=filter(None, map(origin_of, failing)),
                                repeats=repeats[-1] if repeats else None,
                                timing=any(r.timing_method for r in rows))


def origin_of(row) -> str:
    """The `--impl` that loads an outside implementation of a row again, "" for a
    registered one."""
    op, impl, origin = (_text(row, k, {}) for k in ("op", "impl", "impl_origin"))
    return origin or (f"{op}={impl}" if ":" in impl else "")
