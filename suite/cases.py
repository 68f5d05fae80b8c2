"""Case files: TOML -> validated, expanded `Case` records with stable readable ids.

A case file holds one op's cases:

    op = "causal_conv1d"        # required
    seed = 0                    # optional: base seed mixed into every case's seed
    [defaults]                  # optional: parameter values for every sweep and case
    [[sweep]]                   # cartesian product of the list-valued parameters
    name = "widths"             # required, unique in the file; part of the case ids
    tags = ["smoke", "ci"]      # profiles the cases belong to
    combine = "pairwise"        # optional: every pair of values, not every combination
    width = [2, 3, 4]
    exclude = [{width = 2, seqlen = 1}]   # drop combinations matching all these keys
    [[case]]                    # one case; same keys as a sweep, scalar values only

For a parameter whose values are lists (kind int_list), a list of lists is a sweep. A
sweep is the cartesian product of its lists (`combine = "cartesian"`, the default), or a
covering array (suite/covering.py): `combine = "pairwise"` holds every pair of values of
its list-valued keys in at least one valid case, `strength = t` every t-tuple; tuples no
valid case can hold are recorded in `SweepCoverage`, not refused. A cartesian sweep of
more than MAX_SWEEP combinations (a covering sweep of more than MAX_SWEEP t-tuples) is
refused unless the caller lifts the limit (`--allow-large`), and sweeps not tagged for the
requested profile are never expanded.
Every error names the file, the sweep or case, and the key, and is raised before any case
runs.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
import tomllib
import zlib
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Iterable, Mapping, Optional

from bwd_suite.suite import covering, registry
from bwd_suite.suite.errors import SuiteInputError, did_you_mean
from bwd_suite.suite.params import INT64_MAX
from bwd_suite.suite.profiles import (  # noqa: F401 - re-exported
    CASES_DIR, PROFILE_INCLUDES, PROFILES, SCENARIOS, profile_tags)

_FILE_KEYS = {"op", "seed", "defaults", "sweep", "case"}
_ENTRY_KEYS = {"name", "tags", "seed", "exclude", "combine", "strength"}
# The most combinations one sweep may hold (before exclusions) unless --allow-large; for a
# covering sweep, the most t-tuples of values it may have to cover.
MAX_SWEEP = 100_000
COMBINE = ("cartesian", "pairwise")


@dataclass(frozen=True)
class Case:
    op: str
    group: str  # the sweep or case name
    id: str  # op/group/param-tokens, stable across runs and machines
    params: Mapping
    tags: frozenset
    seed: int
    file: str

    def in_profile(self, profile: str) -> bool:
        return bool(profile_tags(profile) & self.tags)


def profile_names(profile: str, where: str = "--profile") -> str:
    if profile not in PROFILES:
        raise SuiteInputError(where, did_you_mean(profile, PROFILES))
    return profile


def _where(file: str, kind: str = "", name: str = "", key: str = "") -> str:
    parts = [file]
    if kind:
        parts.append(f'{kind} "{name}"' if name else kind)
    if key:
        parts.append(f'key "{key}"')
    return ", ".join(parts)


def _check_seed(value, where):
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SuiteInputError(where, f"expected a non-negative integer seed, got {value!r}")
    if value > INT64_MAX:
        raise SuiteInputError(where, "the seed does not fit a 64-bit integer")
    return value


def _is_sweep_value(param, value) -> bool:
    if param.kind == "int_list":
        return isinstance(value, list) and bool(value) and all(isinstance(v, list) for v in value)
    return isinstance(value, list)


def _check_value(param, value, where):
    err = param.check(value)
    if err:
        raise SuiteInputError(where, err)


@dataclass(frozen=True)
class _Entry:
    """One validated [[sweep]] or [[case]], not yet expanded into cases."""

    kind: str
    name: str
    tags: frozenset
    fixed: dict
    swept: dict  # parameter -> the list of values it sweeps
    excludes: list
    seed: Optional[int]
    strength: Optional[int] = None  # None: the cartesian product; t: a covering array

    @property
    def size(self) -> int:
        """Combinations of the cartesian product, before exclusions."""
        return math.prod(len(v) for v in self.swept.values())

    @property
    def tuples(self) -> int:
        """t-tuples of values a covering sweep has to cover (0 for a cartesian one)."""
        return covering.tuple_count(self.swept, self.strength) if self.strength else 0


@dataclass(frozen=True)
class SweepCoverage:
    """What one covering sweep produced: its cases against its cartesian product, and
    the t-tuples of values that no valid case can hold (with the reason)."""

    file: str
    op: str
    name: str
    tags: frozenset
    strength: int
    cases: int
    product: int  # combinations of the cartesian product, before exclusions
    uncoverable: tuple  # suite.covering.Uncoverable


def _check_entry(spec, file, kind, entry, defaults) -> _Entry:
    name = entry.get("name")
    if not isinstance(name, str) or not name or "/" in name:
        raise SuiteInputError(_where(file, kind, str(name or ""), "name"),
                              "every sweep and case needs a name without '/'")
    unknown = set(entry) - _ENTRY_KEYS - set(spec.params.by_name)
    if unknown:
        key = sorted(unknown)[0]
        raise SuiteInputError(_where(file, kind, name, key),
                              f"unknown parameter of op {spec.name}: "
                              + did_you_mean(key, spec.params.by_name))
    tags = entry.get("tags", [])
    if not isinstance(tags, list) or not tags:
        raise SuiteInputError(_where(file, kind, name, "tags"),
                              "needs a non-empty list of profiles: " + ", ".join(PROFILES))
    for t in tags:
        if t not in PROFILES:
            raise SuiteInputError(_where(file, kind, name, "tags"), did_you_mean(t, PROFILES))

    fixed, swept = {}, {}
    for pname, param in spec.params.by_name.items():
        value = entry.get(pname, defaults.get(pname, copy.deepcopy(param.default)))
        where = _where(file, kind, name, pname)
        if _is_sweep_value(param, value):
            if kind == "case":
                raise SuiteInputError(where, "a [[case]] takes one value, not a list; "
                                             "use a [[sweep]]")
            if not value:
                raise SuiteInputError(where, "an empty list sweeps nothing")
            for v in value:
                _check_value(param, v, where)
            swept[pname] = value
        else:
            _check_value(param, value, where)
            fixed[pname] = value

    excludes = entry.get("exclude", [])
    if not isinstance(excludes, list) or not all(isinstance(e, dict) for e in excludes):
        raise SuiteInputError(_where(file, kind, name, "exclude"),
                              "expected a list of tables such as [{width = 2}]")
    for e in excludes:
        for k, v in e.items():
            if k not in spec.params.by_name:
                raise SuiteInputError(_where(file, kind, name, "exclude"),
                                      did_you_mean(k, spec.params.by_name))
            _check_value(spec.params.by_name[k], v, _where(file, kind, name, "exclude"))

    seed = entry.get("seed")
    if seed is not None:
        _check_seed(seed, _where(file, kind, name, "seed"))
    strength = _check_combine(file, kind, name, entry, swept)
    return _Entry(kind, name, frozenset(tags), fixed, swept, excludes, seed, strength)


def _check_combine(file, kind, name, entry, swept) -> Optional[int]:
    """The covering strength the entry asks for (None: the cartesian product)."""
    combine, strength = entry.get("combine"), entry.get("strength")
    if kind == "case":
        for key in ("combine", "strength"):
            if key in entry:
                raise SuiteInputError(_where(file, kind, name, key),
                                      "only a [[sweep]] combines values; a [[case]] is one")
        return None
    if combine is not None and (not isinstance(combine, str) or combine not in COMBINE):
        raise SuiteInputError(_where(file, kind, name, "combine"),
                              did_you_mean(combine, COMBINE) if isinstance(combine, str)
                              else f"expected one of {', '.join(COMBINE)}, got {combine!r}")
    if strength is None:
        if combine != "pairwise":
            return None
        strength = 2
    elif isinstance(strength, bool) or not isinstance(strength, int):
        raise SuiteInputError(_where(file, kind, name, "strength"),
                              f"expected an integer, got {strength!r}")
    elif combine == "cartesian":
        raise SuiteInputError(_where(file, kind, name, "strength"),
                              'a cartesian product has no strength: leave out one of '
                              'combine = "cartesian" and strength')
    elif combine == "pairwise" and strength != 2:
        raise SuiteInputError(_where(file, kind, name, "strength"),
                              f'combine = "pairwise" is strength 2, not {strength}: '
                              f'for strength {strength} leave out combine')
    key = "strength" if "strength" in entry else "combine"
    if not 2 <= strength <= len(swept):
        have = (f"{len(swept)} list-valued key" + ("" if len(swept) == 1 else "s")
                + (f" ({', '.join(swept)})" if swept else ""))
        raise SuiteInputError(_where(file, kind, name, key),
                              f"strength {strength} needs 2 <= strength <= the number of "
                              f"list-valued keys; this sweep has {have}")
    return strength


def _check_size(entry: _Entry, file: str, max_sweep: Optional[int]) -> None:
    """Refuse a sweep too large to expand, before expanding it (a typo such as a
    1000-value list can mean millions of cases and minutes of silence)."""
    if max_sweep is None:
        return
    if entry.strength:
        if entry.tuples > max_sweep:
            raise SuiteInputError(_where(file, entry.kind, entry.name),
                                  f"{entry.tuples:,} value {entry.strength}-tuples to cover, "
                                  f"more than {max_sweep:,} for one sweep: lower its "
                                  "strength, split it, or pass --allow-large")
    elif entry.size > max_sweep:
        raise SuiteInputError(_where(file, entry.kind, entry.name),
                              f"{entry.size:,} combinations (before exclusions), more than "
                              f"{max_sweep:,} for one sweep: split it, or pass --allow-large")


def _covering_check(spec):
    """check_case as the covering generator wants it: values -> the reason or None."""
    def check(values):
        bad = spec.check_case(values)
        return (bad[0], f"{bad[1]} (key {bad[0]})") if bad else None
    return check


# Coverings already built in this process: every command and test loads the same files
# many times, and a covering depends only on the sweep and the op's (pure) check_case.
_COVERINGS: dict = {}


def _cover(spec, file, entry: _Entry) -> covering.Covering:
    key = (spec.name, spec.check_case, entry.strength,
           json.dumps([list(entry.swept.items()), sorted(entry.fixed.items()),
                       entry.excludes], default=repr))
    if key in _COVERINGS:
        return _COVERINGS[key]
    try:
        cov = covering.cover(entry.swept, entry.strength, entry.fixed, entry.excludes,
                             _covering_check(spec))
    except covering.CoveringError as e:
        raise SuiteInputError(_where(file, entry.kind, entry.name, "strength" if
                                     entry.strength != 2 else "combine"), str(e)) from None
    _COVERINGS[key] = cov
    return cov


def _combinations(spec, file, entry: _Entry, coverage: Optional[list]):
    """The swept values of each case: the cartesian product, or a covering array."""
    if not entry.strength:
        yield from itertools.product(*entry.swept.values())
        return
    cov = _cover(spec, file, entry)
    if coverage is not None:
        coverage.append(SweepCoverage(file, spec.name, entry.name, entry.tags,
                                      entry.strength, len(cov), entry.size, cov.uncoverable))
    if not cov.rows:  # not one valid case: say why, as the cartesian product would
        values = dict(entry.fixed, **{k: v[0] for k, v in entry.swept.items()})
        bad = spec.check_case(values)
        if bad:
            raise SuiteInputError(_where(file, entry.kind, entry.name, bad[0]),
                                  f"{bad[1]} (in every combination of the sweep)")
    for row in cov.rows:
        yield tuple(row[k] for k in entry.swept)


def _expand_entry(spec, file, entry: _Entry, base_seed,
                  coverage: Optional[list] = None) -> list[Case]:
    swept = entry.swept
    cases = []
    for combo in _combinations(spec, file, entry, coverage):
        values = dict(entry.fixed, **dict(zip(swept, combo)))
        if any(all(values[k] == v for k, v in e.items()) for e in entry.excludes):
            continue
        bad = spec.check_case(values)
        if bad:
            key, reason = bad
            shown = {k: values[k] for k in swept}
            raise SuiteInputError(_where(file, entry.kind, entry.name, key),
                                  f"{reason}" + (f" (in combination {shown})" if shown else ""))
        case_id = f"{spec.name}/{entry.name}/{spec.params.case_id(values)}"
        seed = entry.seed if entry.seed is not None else zlib.crc32(case_id.encode())
        cases.append(Case(op=spec.name, group=entry.name, id=case_id,
                          params=MappingProxyType(values), tags=entry.tags,
                          seed=(seed + base_seed) % 2**31, file=file))
    return cases


def _read_toml(path: Path, file: str) -> dict:
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as e:
        raise SuiteInputError(file, f"cannot be read: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise SuiteInputError(file, f"not UTF-8 text: byte 0x{e.object[e.start]:02x} at "
                                    f"offset {e.start}") from None
    try:
        return tomllib.loads(text)
    except ValueError as e:  # TOMLDecodeError, or an integer of more than 4300 digits
        raise SuiteInputError(file, f"not valid TOML: {e}") from None


def load_file(path: Path, root: Optional[Path] = None, profile: Optional[str] = None,
              max_sweep: Optional[int] = MAX_SWEEP,
              coverage: Optional[list] = None) -> list[Case]:
    """The cases of one file, every entry validated; with `profile`, only the entries
    tagged for it are expanded (the others cannot contribute cases). `max_sweep`: the
    most combinations one sweep may hold (None: no limit). `coverage`: a list that gets
    a SweepCoverage for every covering sweep expanded."""
    file = str(path.relative_to(root)) if root and path.is_relative_to(root) else str(path)
    data = _read_toml(path, file)
    unknown = set(data) - _FILE_KEYS
    if unknown:
        raise SuiteInputError(_where(file, key=sorted(unknown)[0]),
                              "unknown top-level key; expected op, seed, defaults, "
                              "[[sweep]] or [[case]]")
    if "op" not in data:
        raise SuiteInputError(_where(file, key="op"), "missing: which op these cases are for")
    spec = registry.op(data["op"], where=_where(file, key="op"))
    defaults = data.get("defaults", {})
    if not isinstance(defaults, dict):
        raise SuiteInputError(_where(file, key="defaults"), "must be a table")
    for k, v in defaults.items():
        if k not in spec.params.by_name:
            raise SuiteInputError(_where(file, "defaults", key=k),
                                  f"unknown parameter of op {spec.name}: "
                                  + did_you_mean(k, spec.params.by_name))
        if _is_sweep_value(spec.params.by_name[k], v):
            raise SuiteInputError(_where(file, "defaults", key=k), "defaults take one value")
        _check_value(spec.params.by_name[k], v, _where(file, "defaults", key=k))
    base_seed = _check_seed(data.get("seed", 0), _where(file, key="seed"))

    entries, names = [], set()
    for kind in ("sweep", "case"):
        tables = data.get(kind, [])
        if not isinstance(tables, list):
            raise SuiteInputError(_where(file, key=kind), f"write [[{kind}]] tables")
        for table in tables:
            if not isinstance(table, dict):
                raise SuiteInputError(_where(file, key=kind), f"write [[{kind}]] tables")
            name = table.get("name", "")
            if not isinstance(name, str):
                raise SuiteInputError(_where(file, kind, str(name), "name"),
                                      "every sweep and case needs a name without '/'")
            if name in names:
                raise SuiteInputError(_where(file, kind, name, "name"), "used twice in this file")
            names.add(name)
            entry = _check_entry(spec, file, kind, table, defaults)
            _check_size(entry, file, max_sweep)
            entries.append(entry)
    wanted = [e for e in entries if profile is None or e.tags & profile_tags(profile)]
    cases = [c for e in wanted for c in _expand_entry(spec, file, e, base_seed, coverage)]
    ids = set()
    for c in cases:
        if c.id in ids:
            raise SuiteInputError(_where(file, "sweep", c.group),
                                  f"two cases share the id {c.id}")
        ids.add(c.id)
    if not cases and len(wanted) == len(entries):
        raise SuiteInputError(file, "defines no cases")
    return cases


def load_cases(paths: Iterable[Path] = (), op: Optional[str] = None,
               profile: Optional[str] = None, root: Path = CASES_DIR,
               max_sweep: Optional[int] = MAX_SWEEP,
               coverage: Optional[list] = None) -> list[Case]:
    """All cases under `paths` (default: the repository's cases/), filtered; sweeps of
    other profiles are not expanded. `max_sweep` and `coverage` as in load_file."""
    files = []
    for p in (list(paths) or [root]):
        p = Path(p)
        if p.is_dir():
            # training-step scenarios are another kind of case (suite/step/scenario.py)
            files += sorted(f for f in p.rglob("*.toml")
                            if SCENARIOS not in f.relative_to(p).parts)
        elif p.exists():
            files.append(p)
        else:
            raise SuiteInputError(str(p), "no such case file or folder")
    if op is not None:
        registry.op(op, where="--op")
    if profile is not None:
        profile_names(profile)
    seen: dict[str, str] = {}
    out = []
    for f in files:
        for case in load_file(f, root, profile, max_sweep, coverage):
            if case.id in seen:
                raise SuiteInputError(case.file, f"case id {case.id} also defined in "
                                                 f"{seen[case.id]}")
            seen[case.id] = case.file
            if op is not None and case.op != op:
                continue
            if profile is not None and not case.in_profile(profile):
                continue
            out.append(case)
    return out
