"""Case files: TOML -> validated, expanded `Case` records with stable readable ids.

A case file holds one op's cases:

    op = "causal_conv1d"        # required
    seed = 0                    # optional: base seed mixed into every case's seed
    [defaults]                  # optional: parameter values for every sweep and case
    [[sweep]]                   # cartesian product of the list-valued parameters
    name = "widths"             # required, unique in the file; part of the case ids
    tags = ["smoke", "ci"]      # profiles the cases belong to
    width = [2, 3, 4]
    exclude = [{width = 2, seqlen = 1}]   # drop combinations matching all these keys
    [[case]]                    # one case; same keys as a sweep, scalar values only

For a parameter whose values are lists (kind int_list), a list of lists is a sweep.
Every error names the file, the sweep or case, and the key, and is raised before any case
runs.
"""

from __future__ import annotations

import copy
import itertools
import tomllib
import zlib
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Iterable, Mapping, Optional

from suite import registry
from suite.errors import SuiteInputError, did_you_mean

PROFILES = ("smoke", "ci", "gpu", "perf", "nightly")
# A profile also runs the cases tagged with the profiles it includes.
PROFILE_INCLUDES = {"ci": ("smoke",), "nightly": ("smoke", "ci", "gpu")}
CASES_DIR = Path(__file__).resolve().parents[1] / "cases"

_FILE_KEYS = {"op", "seed", "defaults", "sweep", "case"}
_ENTRY_KEYS = {"name", "tags", "seed", "exclude"}


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
        wanted = {profile, *PROFILE_INCLUDES.get(profile, ())}
        return bool(wanted & self.tags)


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
    return value


def _is_sweep_value(param, value) -> bool:
    if param.kind == "int_list":
        return isinstance(value, list) and bool(value) and all(isinstance(v, list) for v in value)
    return isinstance(value, list)


def _check_value(param, value, where):
    err = param.check(value)
    if err:
        raise SuiteInputError(where, err)


def _expand_entry(spec, file, kind, entry, defaults, base_seed) -> list[Case]:
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

    seed_override = entry.get("seed")
    if seed_override is not None:
        _check_seed(seed_override, _where(file, kind, name, "seed"))
    cases = []
    for combo in itertools.product(*swept.values()):
        values = dict(fixed, **dict(zip(swept, combo)))
        if any(all(values[k] == v for k, v in e.items()) for e in excludes):
            continue
        bad = spec.check_case(values)
        if bad:
            key, reason = bad
            shown = {k: values[k] for k in swept}
            raise SuiteInputError(_where(file, kind, name, key),
                                  f"{reason}" + (f" (in combination {shown})" if shown else ""))
        case_id = f"{spec.name}/{name}/{spec.params.case_id(values)}"
        seed = seed_override if seed_override is not None else zlib.crc32(case_id.encode())
        cases.append(Case(op=spec.name, group=name, id=case_id,
                          params=MappingProxyType(values), tags=frozenset(tags),
                          seed=(seed + base_seed) % 2**31, file=file))
    return cases


def load_file(path: Path, root: Optional[Path] = None) -> list[Case]:
    file = str(path.relative_to(root)) if root and path.is_relative_to(root) else str(path)
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise SuiteInputError(file, f"not valid TOML: {e}") from None
    except OSError as e:
        raise SuiteInputError(file, f"cannot be read: {e.strerror}") from None
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

    cases, names = [], set()
    for kind in ("sweep", "case"):
        entries = data.get(kind, [])
        if not isinstance(entries, list):
            raise SuiteInputError(_where(file, key=kind), f"write [[{kind}]] tables")
        for entry in entries:
            if not isinstance(entry, dict):
                raise SuiteInputError(_where(file, key=kind), f"write [[{kind}]] tables")
            name = entry.get("name", "")
            if not isinstance(name, str):
                raise SuiteInputError(_where(file, kind, str(name), "name"),
                                      "every sweep and case needs a name without '/'")
            if name in names:
                raise SuiteInputError(_where(file, kind, name, "name"), "used twice in this file")
            names.add(name)
            cases += _expand_entry(spec, file, kind, entry, defaults, base_seed)
    ids = set()
    for c in cases:
        if c.id in ids:
            raise SuiteInputError(_where(file, "sweep", c.group),
                                  f"two cases share the id {c.id}")
        ids.add(c.id)
    if not cases:
        raise SuiteInputError(file, "defines no cases")
    return cases


def load_cases(paths: Iterable[Path] = (), op: Optional[str] = None,
               profile: Optional[str] = None, root: Path = CASES_DIR) -> list[Case]:
    """All cases under `paths` (default: the repository's cases/), filtered."""
    files = []
    for p in (list(paths) or [root]):
        p = Path(p)
        if p.is_dir():
            files += sorted(p.rglob("*.toml"))
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
        for case in load_file(f, root):
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
