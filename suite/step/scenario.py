"""Scenario files: TOML -> validated `Scenario` records (cases/scenarios/*.toml).

A scenario file holds scenarios of one model kind:

    model = "mamba"            # required: a registered model (suite/step/models.py)
    seed = 0                   # optional: mixed into every scenario's seed
    [defaults]                 # optional: any scenario key, for every scenario of the file
    [[scenario]]
    name = "mamba-tiny"        # required, unique across files: the id is step/<name>
    tags = ["smoke", "ci"]     # profiles, as case files' (smoke < ci < gpu < nightly)
    dim = 16                   # the model's keys (its ParamSet) and the training keys below
    impl = { causal_conv1d = "torch_ref" }  # op -> implementation (default: each yardstick)
    checkpoint = ["block"]     # the layer kinds the checkpoint check recomputes
    checks = ["float64", "checkpoint"]      # default: every check that applies

Every error names the file, the scenario and the key, before anything runs: an unknown
model, op or implementation, an accumulation that does not divide the batch, a checkpoint
of a layer the model does not have, a check that does not apply.
"""

from __future__ import annotations

import tomllib
import zlib
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Iterable, Mapping, Optional

from bwd_suite.suite.errors import SuiteInputError, did_you_mean
from bwd_suite.suite.params import Param, ParamSet
from bwd_suite.suite.profiles import CASES_DIR, PROFILES, STEP_KIND, profile_tags
from bwd_suite.suite.selection import id_matches
from bwd_suite.suite.step import backends as be
from bwd_suite.suite.step import checks as ck
from bwd_suite.suite.step.models import ModelSpec, model

SCENARIOS_DIR = CASES_DIR / "scenarios"
MASKS = ("none", "prompt", "padding_right")
DTYPES = ("float32", "bfloat16", "float16")

# The training loop's keys, the same for every model.
TRAINING = ParamSet((
    Param("batch", "int", 4, "B, sequences per step", minimum=1),
    Param("seq", "int", 16, "T, tokens per sequence", minimum=2),
    Param("dtype", "str", "bfloat16", "parameters, activations and gradients (16-bit: fp32 "
          "master weights)", choices=DTYPES),
    Param("steps", "int", 3, "training steps compared with the float64 model", minimum=1),
    Param("lr", "float", 1e-3, "AdamW learning rate", minimum=0.0),
    Param("beta1", "float", 0.9, "AdamW first-moment decay", minimum=0.0),
    Param("beta2", "float", 0.999, "AdamW second-moment decay", minimum=0.0),
    Param("eps", "float", 1e-8, "AdamW denominator epsilon", minimum=0.0),
    Param("weight_decay", "float", 0.01, "AdamW decoupled weight decay", minimum=0.0),
    Param("max_norm", "float", 1.0, "global-norm clipping (0: none)", minimum=0.0),
    Param("loss_scale", "float", 1024.0, "S: the loss times S before the backward, the "
          "gradients unscaled by the optimizer", minimum=0.0),
    Param("accumulation", "int", 2, "k micro-batches of the accumulation checks (divides "
          "batch)", minimum=2),
    Param("mask", "str", "padding_right", "which labels are ignored: none, the first "
          "mask_len tokens (prompt), or mask_len * (b + 1) // B last tokens of sequence b",
          choices=MASKS),
    Param("mask_len", "int", 4, "tokens of the prompt or the longest padding", minimum=0),
    Param("chunks", "int_list", [], "chunk lengths of the chunked_state check, the last "
          "taking the rest (empty: two halves)", minimum=1),
    Param("overflow_step", "int", 2, "the step whose gradient overflows in the overflow "
          "check", minimum=1),
))
_OWN_KEYS = {"name", "tags", "seed", "impl", "checkpoint", "checks"}
_FILE_KEYS = {"model", "seed", "defaults", "scenario"}


@dataclass(frozen=True)
class Scenario:
    model: str
    name: str
    id: str  # step/<name>
    params: Mapping  # the model's and the training keys, every one set
    tags: frozenset
    seed: int
    file: str  # relative to cases/ when inside it, as the ops' case files
    impl: Mapping  # op -> implementation name (the scenario's default choice set)
    checkpoint: tuple  # layer kinds
    checks: tuple  # check names, in ck.CHECKS order

    def in_profile(self, profile: str) -> bool:
        return bool(self.tags & profile_tags(profile))

    @property
    def spec(self) -> ModelSpec:
        return model(self.model)

    def where(self, key: str) -> str:
        return _where(self.file, self.name, key)


def _where(file: str, name: Optional[str] = None, key: Optional[str] = None) -> str:
    parts = [file] + ([f'scenario "{name}"'] if name else []) + \
        ([f'key "{key}"'] if key else [])
    return ", ".join(parts)


def _check_value(param: Param, value, where: str) -> None:
    why = param.check(value)
    if why:
        raise SuiteInputError(where, why)


def _names(value, where: str) -> list:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SuiteInputError(where, f"expected a list of names, got {value!r}")
    return value


def _micro_batch_counts(spec: ModelSpec, params: Mapping, k: int) -> list:
    """Scored tokens of each of the k micro-batches (the labels decide them)."""
    import torch

    _, labels = spec.training.batch(params, 0, torch.device("cpu"))
    return [spec.training.scored(part) for part in labels.chunk(k)]


def _check_scenario(spec: ModelSpec, s: Scenario) -> None:
    p = s.params
    for key, value in p.items():
        param = spec.params.by_name.get(key) or TRAINING.by_name[key]
        _check_value(param, value, s.where(key))
    bad = spec.check(p)
    if bad:
        raise SuiteInputError(s.where(bad[0]), bad[1])
    for k in ("beta1", "beta2"):
        if not p[k] < 1:
            raise SuiteInputError(s.where(k), f"{p[k]!r} must be in [0, 1)")
    if p["loss_scale"] <= 0:
        raise SuiteInputError(s.where("loss_scale"), f"{p['loss_scale']!r} must be positive")
    if p["batch"] % p["accumulation"]:
        raise SuiteInputError(s.where("accumulation"), f"{p['accumulation']} micro-batches do "
                                                       f"not divide batch {p['batch']}")
    if p["mask"] != "none" and p["mask_len"] >= p["seq"]:
        raise SuiteInputError(s.where("mask_len"), f"{p['mask_len']} masked tokens leave "
                                                   f"nothing of a sequence of {p['seq']}")
    if sum(p["chunks"]) >= p["seq"]:
        raise SuiteInputError(s.where("chunks"), f"{p['chunks']} leave no last chunk of a "
                                                 f"sequence of {p['seq']}")
    if p["overflow_step"] > p["steps"] and "overflow" in s.checks:
        raise SuiteInputError(s.where("overflow_step"), f"step {p['overflow_step']} of "
                                                        f"{p['steps']}")
    for layer in s.checkpoint:
        if layer not in spec.layers:
            raise SuiteInputError(s.where("checkpoint"), f"model {spec.name} has no layer "
                                  f"{layer!r} to checkpoint; its layers: "
                                  f"{', '.join(spec.layers)}")
    for name in s.checks:
        why = ck.CHECKS[name].refuses(spec, p, s.checkpoint)
        if why:
            raise SuiteInputError(s.where("checks"), f"{name}: {why}")
    if "accumulation_mean" in s.checks:
        counts = _micro_batch_counts(spec, p, p["accumulation"])
        if len(set(counts)) == 1:
            raise SuiteInputError(s.where("mask"), f"the {p['accumulation']} micro-batches "
                                  f"score {counts[0]} tokens each: a per-micro-batch mean "
                                  f"equals the global one, so accumulation_mean cannot fail "
                                  f"(mask padding_right gives unequal counts)")
    for op, name in s.impl.items():
        be.resolve(op, name, s.where(f"impl.{op}"))


def _scenario(spec: ModelSpec, file: str, table: dict, defaults: dict,
              base_seed: int) -> Scenario:
    name = table.get("name")
    if not isinstance(name, str) or not name or "/" in name:
        raise SuiteInputError(_where(file, key="name"), "every scenario needs a name "
                                                        "without '/'")
    merged = dict(defaults, **table)
    known = set(spec.params.by_name) | set(TRAINING.by_name) | _OWN_KEYS
    for key in merged:
        if key not in known:
            raise SuiteInputError(_where(file, name, key),
                                  f"unknown key of a {spec.name} scenario: "
                                  + did_you_mean(key, known))
    params = {**spec.params.defaults(), **TRAINING.defaults()}
    params.update({k: v for k, v in merged.items() if k not in _OWN_KEYS})
    tags = _names(merged.get("tags", []), _where(file, name, "tags"))
    for t in tags:
        if t not in PROFILES:
            raise SuiteInputError(_where(file, name, "tags"), did_you_mean(t, PROFILES))
    impl = merged.get("impl", {})
    if not isinstance(impl, dict) or not all(isinstance(v, str) for v in impl.values()):
        raise SuiteInputError(_where(file, name, "impl"), "write a table op = "
                                                          "\"implementation\"")
    for op in impl:
        if op not in spec.all_ops:
            raise SuiteInputError(_where(file, name, f"impl.{op}"),
                                  f"model {spec.name} calls no op {op!r}: "
                                  + did_you_mean(op, spec.all_ops))
    checkpoint = tuple(_names(merged.get("checkpoint", [spec.layers[0]]),
                              _where(file, name, "checkpoint")))
    checks = merged.get("checks")
    if checks is None:
        checks = [c.name for c in ck.CHECKS.values() if c.default_on(spec, params, checkpoint)]
    for c in _names(checks, _where(file, name, "checks")):
        if c not in ck.CHECKS:
            raise SuiteInputError(_where(file, name, "checks"), did_you_mean(c, ck.CHECKS))
    seed = merged.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2 ** 31:
        raise SuiteInputError(_where(file, name, "seed"), "a non-negative 31-bit integer")
    sid = f"{STEP_KIND}/{name}"
    s = Scenario(model=spec.name, name=name, id=sid, params=MappingProxyType(params),
                 tags=frozenset(tags), seed=(zlib.crc32(sid.encode()) + base_seed + seed)
                 % 2 ** 31, file=file, impl=MappingProxyType(dict(impl)),
                 checkpoint=checkpoint, checks=tuple(c for c in ck.CHECKS if c in checks))
    _check_scenario(spec, s)
    return s


def _read(path: Path, file: str) -> dict:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise SuiteInputError(file, f"cannot be read: {e}") from None
    except ValueError as e:
        raise SuiteInputError(file, f"not valid TOML: {e}") from None


def load_file(path: Path, root: Optional[Path] = None) -> list[Scenario]:
    path = Path(path)
    file = str(path.relative_to(root)) if root and path.resolve().is_relative_to(root) \
        else str(path)
    data = _read(path, file)
    unknown = set(data) - _FILE_KEYS
    if unknown:
        raise SuiteInputError(_where(file, key=sorted(unknown)[0]),
                              "unknown top-level key; expected model, seed, defaults or "
                              "[[scenario]]")
    if "model" not in data:
        raise SuiteInputError(_where(file, key="model"), "missing: which model these "
                                                          "scenarios train")
    spec = model(str(data["model"]), where=_where(file, key="model"))
    defaults = data.get("defaults", {})
    if not isinstance(defaults, dict) or "name" in defaults:
        raise SuiteInputError(_where(file, key="defaults"), "must be a table without a name")
    base_seed = data.get("seed", 0)
    if isinstance(base_seed, bool) or not isinstance(base_seed, int):
        raise SuiteInputError(_where(file, key="seed"), "must be an integer")
    tables = data.get("scenario", [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise SuiteInputError(_where(file, key="scenario"), "write [[scenario]] tables")
    if not tables:
        raise SuiteInputError(file, "defines no scenarios")
    return [_scenario(spec, file, t, defaults, base_seed) for t in tables]


def load(paths: Iterable[Path] = (), profile: Optional[str] = None,
         match: Iterable[str] = ()) -> list[Scenario]:
    """The scenarios of the given files or folders (default: cases/scenarios/), tagged for
    `profile` (None: all) and whose id contains one of `match` (none: all)."""
    root = CASES_DIR  # files recorded as the ops' are: relative to cases/
    files = []
    for p in (list(paths) or [SCENARIOS_DIR]):
        p = Path(p)
        if p.is_dir():
            files += sorted(p.rglob("*.toml"))
        elif p.exists():
            files.append(p)
        else:
            raise SuiteInputError(str(p), "no such scenario file or folder")
    if profile is not None and profile not in PROFILES:
        raise SuiteInputError("--profile", did_you_mean(profile, PROFILES))
    seen: dict = {}
    out = []
    match = list(match)
    for f in files:
        for s in load_file(f, root):
            if s.id in seen:
                raise SuiteInputError(_where(s.file, s.name, "name"),
                                      f"scenario id {s.id} also defined in {seen[s.id]}")
            seen[s.id] = s.file
            if profile is not None and not s.in_profile(profile):
                continue
            if match and not any(id_matches(m, s.id) for m in match):
                continue
            out.append(s)
    return out
