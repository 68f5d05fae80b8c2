"""Greedy shrinking of a failing case to a minimal one that fails the same way.

From the failing parameters, every smaller variant is generated (`variants`): a size
axis moved toward its minimum (to it, then by halves of the distance, then one step),
another integer toward its default or its minimum, a float toward its default, a bool
turned off, a string choice set to its default, a list emptied, shortened or its
elements shrunk. A variant that check_case refuses is repaired once more by resetting the
parameter it blames to its default; one that still cannot run is dropped without a try.

Variants are ordered by `size_key`: the inputs' total element count first, then the
number of parameters away from their defaults, then the distance from the defaults; only
variants strictly smaller than the current case are tried, the smallest first. The first
one that still fails the same way (`Failure.same_as`: the same verdict, failure kind and
first failing output, or exception type; and not a case where the yardstick is as wrong,
unless the failure started as one) becomes the current case, and the variants are
generated again from it (Hypothesis's greedy shrink). It stops when no variant fails, or
after `max_tries` runs.

When no smaller variant fails, detours are tried: the op's rewrites of the case
(`ParamSet.rewrites`: the same inputs from other parameters, such as a preset spelled as
the list of sizes it stands for; no larger), and a string choice reset to its default
even when that case is larger (a named preset back to the default may free parameters
the preset made inert, its sizes). Each detour that fails the same way is shrunk from
(its own detours being rewrites only), and the smallest result is taken when it ends
smaller than the case it left.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from typing import Callable, Iterator, Mapping, Optional

from bwd_suite.suite.fuzz.domains import domain_of
from bwd_suite.suite.fuzz.draw import out_of_bounds
from bwd_suite.suite.opspec import tensor_list
from bwd_suite.suite.outcomes import FailureKind, Verdict
from bwd_suite.suite.params import FloatRange, IntList, IntRange

REPAIRS = 2


@dataclass(frozen=True)
class Failure:
    """How an item failed, for "still fails the same way": the verdict (fail or
    error), the failure kind, and the first output beyond tolerance (unwritten, not
    finite) or, for an error, the exception type."""

    verdict: str
    kind: str
    where: str
    # the yardstick's own error on that output is beyond what the item was allowed and
    # at least half the item's: a case every implementation fails (a golden that
    # underflows in the output dtype, say), not this one's bug
    yardstick_too: bool = False

    @property
    def core(self) -> "Failure":
        """The failure without the yardstick's part: what groups failures."""
        return Failure(self.verdict, self.kind, self.where)

    def same_as(self, target: "Failure") -> bool:
        """Fails the way `target` did: the same core, and not a case the yardstick fails
        as badly unless `target` was one (shrinking must not slip from a bug of the
        implementation to a case nobody passes)."""
        return self.core == target.core and (target.yardstick_too or not self.yardstick_too)

    def __str__(self) -> str:
        return (f"{self.verdict}: {self.kind}" + (f" of {self.where}" if self.where else "")
                + (" (the yardstick as wrong)" if self.yardstick_too else ""))


def failure_of(row) -> Optional[Failure]:
    """The Failure of a row; None unless the implementation failed or raised (unsupported,
    passed or timed out: a timeout is not shrunk; nor is the harness's own error, a golden
    or yardstick that failed, which is no bug of the implementation)."""
    if row.verdict not in (Verdict.FAIL, Verdict.ERROR) \
            or row.failure_kind is FailureKind.HARNESS:
        return None
    kind = str(row.failure_kind or "")
    if row.verdict is Verdict.ERROR:
        m = re.match(r"[A-Za-z_][\w.]*", row.reason or "")
        return Failure(str(row.verdict), kind, m.group(0) if m else "")
    out = next((o for o in row.outputs if o.get("n_unwritten") or o.get("n_nonfinite")
                or (o.get("err") or 0) > (o.get("allowed") or 0)), None)
    if out is None:
        return Failure(str(row.verdict), kind, "")
    ref, allowed, err = out.get("ref_err"), out.get("allowed"), out.get("err")
    both = (ref is not None and allowed is not None and err is not None
            and ref > allowed and err <= 2 * ref)
    return Failure(str(row.verdict), kind, out["name"], both)


# ---------------------------------------------------------------- sizes

def input_numel(spec, params: Mapping) -> int:
    """Total elements of the case's input tensors (built on the CPU)."""
    import torch

    inputs = spec.make_inputs(params, 0, torch.device("cpu"))
    return sum(t.numel() for v in inputs.tensors.values() for t in tensor_list(v))


def _distance(param, value) -> float:
    d = param.default
    if param.kind in ("int", "float") and isinstance(d, (int, float)):
        return abs(value - d) / (1 + abs(d))
    if param.kind == "int_list":
        return len(value) + sum(value) / (1 + sum(value))
    return 0.0 if value == d else 1.0


def size_key(spec, params: Mapping, numel: Callable[[Mapping], int]) -> tuple:
    """What shrinking minimises, in order: input elements, parameters away from their
    defaults, distance from the defaults."""
    ps = spec.params.params
    return (numel(params), sum(params[p.name] != p.default for p in ps),
            round(sum(_distance(p, params[p.name]) for p in ps), 12))


# ---------------------------------------------------------------- variants

def _toward(value: int, target: int) -> list[int]:
    """target, then value moved toward it by halves of the distance, then one step."""
    out, d = [target], value - target
    while abs(d) > 1:
        d = int(d / 2)
        out.append(value - d)
    if value != target:
        out.append(value - (1 if value > target else -1))
    return [v for v in dict.fromkeys(out) if v != value]


def _nice(v: float) -> float:
    return float(f"{v:.2g}")


def _values(param, value, size: str) -> list:
    """Smaller values of one parameter."""
    d = domain_of(param)
    if param.kind == "bool":
        return [False] if value else ([param.default] if param.default != value else [])
    if param.kind == "str":
        return [param.default] if value != param.default else []
    if param.kind == "int":
        low = d.low if isinstance(d, IntRange) else param.minimum
        out = _toward(value, int(low)) if low is not None else []
        if not (isinstance(d, IntRange) and d.axis):
            out = _toward(value, param.default) + out
        return list(dict.fromkeys(out))
    if param.kind == "float":
        if value == param.default:
            return []
        out = [param.default]
        for k in (2, 4):
            v = _nice(value + (param.default - value) / k)
            # not ever closer to the default by halves (9e-13 for 0): only the default
            # itself once the value is within 1e-3 of it
            if 1e-3 * (1 + abs(param.default)) <= abs(v - param.default) \
                    < abs(value - param.default):
                out.append(v)
        if isinstance(d, FloatRange):
            out = [v for v in out if v in d or v == param.default]
        return list(dict.fromkeys(out))
    if param.kind == "int_list":
        if not value:
            return []
        low = d.element.low if isinstance(d, IntList) else (param.minimum or 1)
        out = [[]]
        out += [value[:i] + value[i + 1:] for i in range(len(value))]
        for i, v in enumerate(value):
            out += [value[:i] + [w] + value[i + 1:] for w in _toward(v, int(low))]
        return out
    return []


def variants(spec, params: Mapping, size: str = "") -> Iterator[tuple[str, dict]]:
    """(parameter, variant) for every one-parameter move toward smaller."""
    for p in spec.params.params:
        for v in _values(p, params[p.name], size):
            if p.check(v) is None:
                yield p.name, dict(params, **{p.name: v})


def repaired(spec, params: dict, device_type: str = "cpu") -> Optional[dict]:
    """The variant, or it with the parameters check_case (or the op's fuzz bounds) blame
    reset to their defaults; None when it stays refused."""
    for _ in range(REPAIRS + 1):
        bad = spec.check_case(params) or out_of_bounds(spec, params, device_type)
        if not bad:
            return params
        key = bad[0]
        p = spec.params.by_name.get(key)
        # a size axis is not reset: that would grow the case, not repair it
        if p is None or params[key] == p.default \
                or (isinstance(p.domain, IntRange) and p.domain.axis):
            return None
        params = dict(params, **{key: copy.deepcopy(p.default)})
    return None


def rewrites(spec, params: Mapping, device_type: str = "cpu") -> list[dict]:
    """The op's other spellings of this case (`ParamSet.rewrites`: the same inputs from
    other parameters), each a whole valid parameter dict; one check_case or the fuzz
    bounds refuse is dropped, not repaired (a repair would change the inputs)."""
    fn = spec.params.rewrites
    out = []
    for r in (fn(params) if fn is not None else []):
        v = dict(params, **r)
        if v == params or any(p.check(v[p.name]) for p in spec.params.params):
            continue
        if spec.check_case(v) or out_of_bounds(spec, v, device_type):
            continue
        out.append(v)
    return out


# ---------------------------------------------------------------- the loop

@dataclass
class Shrunk:
    params: dict
    row: object  # the ResultRow of the minimal case
    failure: Failure
    tries: int  # items run while shrinking
    steps: int  # variants accepted
    exhausted: bool  # stopped at max_tries, not at a case no variant of which fails
    start_key: tuple = ()
    key: tuple = ()
    out_of_time: bool = False  # stopped by `stop` (fuzz --time) before a minimal case


def shrink(spec, params: Mapping, row, run: Callable[[dict], object],
           can_run: Callable[[dict], bool] = lambda p: True, max_tries: int = 200,
           numel: Optional[Callable[[Mapping], int]] = None,
           device_type: str = "cpu", escape: bool = True,
           _tried: Optional[set] = None,
           stop: Callable[[], bool] = lambda: False) -> Shrunk:
    """Shrink the failing case `params` (whose row is `row`). `run(params)` runs one
    item and returns its row; `can_run(params)` says whether the implementation and
    device can run a variant (one that cannot costs no try). `escape`: try the larger
    string-choice resets once no smaller variant fails, besides the op's rewrites (see
    the module doc). `stop()` true ends it before the next try with what it has."""
    target = failure_of(row)
    if target is None:
        raise ValueError("shrink: the row did not fail")
    cache: dict = {}

    def n(p):
        k = json.dumps(p, sort_keys=True)
        if k not in cache:
            cache[k] = (numel or (lambda q: input_numel(spec, q)))(p)
        return cache[k]

    current, cur_row = dict(params), row
    cur_key = start_key = size_key(spec, current, n)
    # shared with the detours' own shrinking: a case tried once would run the same again
    # (its seed comes from its id), so no detour runs it twice or loops back
    tried: set = _tried if _tried is not None else set()
    tried.add(json.dumps(current, sort_keys=True))
    tries = steps = 0
    while tries < max_tries:
        if stop():
            return Shrunk(current, cur_row, failure_of(cur_row), tries, steps, False,
                          start_key, cur_key, out_of_time=True)
        found = False
        pool = {}
        for _, v in variants(spec, current):
            v = repaired(spec, v, device_type)
            if v is None:
                continue
            ident = json.dumps(v, sort_keys=True)
            if ident in tried or ident in pool or not can_run(v):
                continue
            k = size_key(spec, v, n)
            if k < cur_key:
                pool[ident] = (k, v)
        for ident, (k, v) in sorted(pool.items(), key=lambda kv: kv[1][0]):
            if tries >= max_tries or stop():
                break
            tries += 1
            tried.add(ident)
            r = run(v)
            f = failure_of(r)
            if f is not None and f.same_as(target):
                current, cur_row, cur_key, found = v, r, k, True
                steps += 1
                break
        if not found:
            # detours at a local minimum: the op's rewrites (the same inputs spelled
            # otherwise, no more elements) and, with `escape`, string choices reset to
            # their defaults (maybe larger). Each that fails the same way is shrunk from;
            # the smallest result is taken if it ends below the current case (a detour
            # can strand: the bug, or the way it fails, may need what another one drops)
            detours = [v for v in rewrites(spec, current, device_type) if n(v) <= n(current)]
            if escape:
                detours += [repaired(spec, v, device_type) for name, v in
                            variants(spec, current) if spec.params.by_name[name].kind == "str"]
            best = None
            for v in detours:
                if tries >= max_tries or stop():
                    break
                ident = json.dumps(v, sort_keys=True) if v is not None else None
                if v is None or ident in tried or not can_run(v):
                    continue
                tries += 1
                tried.add(ident)
                r = run(v)
                f = failure_of(r)
                if f is None or not f.same_as(target):
                    continue
                inner = shrink(spec, v, r, run, can_run, max_tries - tries, n, device_type,
                               escape=False, _tried=tried, stop=stop)
                tries += inner.tries
                if inner.key < (best.key if best else cur_key):
                    best = inner
            if best is not None:
                current, cur_row, cur_key, found = best.params, best.row, best.key, True
                steps += best.steps + 1
        if not found:
            return Shrunk(current, cur_row, failure_of(cur_row), tries, steps,
                          tries >= max_tries and bool(pool), start_key, cur_key,
                          out_of_time=stop())
    return Shrunk(current, cur_row, failure_of(cur_row), tries, steps, True, start_key,
                  cur_key)
