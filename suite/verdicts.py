"""Verdicts: error metrics per output, the pass rule, unwritten outputs, modified inputs,
and the determinism classifier.

Every check returns a record with a reason; nothing here turns an exception into a bare
False (tritonbench's wart). Metrics are computed in float64 on the golden's device.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Mapping, Optional, Sequence

import torch

from bwd_suite.suite import tolerances, values
from bwd_suite.suite.inputs import is_poison
from bwd_suite.suite.opspec import OutputSpec
from bwd_suite.suite.outcomes import Determinism, FailureKind, Verdict  # noqa: F401 - re-exported


@dataclass(frozen=True)
class OutputCheck:
    name: str
    tol_class: str
    numel: int
    scale: float  # max |golden|, the normalizer
    err: float  # max |impl - golden| / scale: what the rule compares
    ref_err: float  # the same for the yardstick implementation
    cond_err: float  # how far the golden moves under one fp32 rounding of the inputs
    allowed: float
    max_abs: float
    max_rel: float  # max |impl - golden| / max(|golden|, 1e-3 * scale)
    rel_l2: float  # ||impl - golden|| / ||golden||
    n_bad: int  # elements whose error exceeds allowed * scale
    n_nonfinite: int
    n_unwritten: int
    worst_index: str  # index of the largest error, e.g. "[1, 17, 63]"
    failure: Optional[FailureKind]
    message: str
    # beyond `allowed`, where the yardstick is weaker than it, with the yardstick's own
    # output bit for bit: the weak-yardstick outcome, no failure
    weak: bool = False

    def as_row(self) -> dict:
        d = asdict(self)
        for k in ("failure", "message", "weak"):
            d.pop(k)
        return d


def _index(flat: int, shape) -> str:
    idx = []
    for s in reversed(shape):
        idx.append(flat % s if s else 0)
        flat //= s if s else 1
    return "[" + ", ".join(map(str, reversed(idx))) + "]"


flat = values.flat  # a list as one tensor: metrics over a list are the whole list's


# Elements per slice of the float64 comparisons: their temporaries stay near a GB however
# large the output (16384 x 151936 logits compared whole needed 80 GB beside the golden).
CHUNK = 1 << 25


def _slices(n: int):
    for start in range(0, n, CHUNK):
        yield slice(start, min(start + CHUNK, n))


def _abs_max(t: torch.Tensor) -> float:
    """max |t| (NaN if t holds one, 0 when empty), slice by slice."""
    t = t.reshape(-1)
    if not t.numel():
        return 0.0
    return torch.stack([t[sl].abs().max().to(torch.float64)
                        for sl in _slices(t.numel())]).max().item()


def golden_scale(golden) -> float:
    """max|golden| of a tensor or a list, 1 where it is 0 or empty: what errors are
    normalized by."""
    maxima = [_abs_max(x) for x in values.tensors(golden)]
    scale = max(maxima, key=lambda m: (math.isnan(m), m)) if maxima else 0.0
    return scale if scale > 0 else 1.0


def _list_index(flat_index: int, shapes) -> str:
    """"[i][j, k]": element [j, k] of the list's i-th tensor."""
    for i, shape in enumerate(shapes):
        n = math.prod(shape)
        if flat_index < n:
            return f"[{i}]{_index(flat_index, shape)}"
        flat_index -= n
    return "[]"


def normalized_error(actual, golden) -> float:
    """max |actual - golden| / max |golden|; inf if any element is not finite."""
    actual, golden = flat(actual).reshape(-1), flat(golden).reshape(-1)
    scale = golden_scale(golden)
    worst = 0.0
    for sl in _slices(golden.numel()):
        diff = (actual[sl].to(device=golden.device, dtype=torch.float64)
                - golden[sl].to(torch.float64)).abs()
        if not torch.isfinite(diff).all():
            return float("inf")
        worst = max(worst, diff.max().item())
    return worst / scale


def _later_is_worse(best: Optional[float], v: float) -> bool:
    """Whether a later slice's largest error v displaces best: a NaN beats any number and
    the first of equals stays (torch.argmax over the whole would pick the same)."""
    if best is None:
        return True
    if math.isnan(best):
        return False
    return math.isnan(v) or v > best


def check_output(spec: OutputSpec, actual, golden, ref_err: float, case_dtype: torch.dtype,
                 cond_err: float = 0.0, yardstick=None,
                 allowed: Optional[float] = None) -> OutputCheck:
    """The verdict of one output: a tensor, or a list of tensors compared as a whole (their
    worst index names the tensor, "[i][j, k]"). Computed slice by slice (CHUNK). The same
    rule for every implementation: the arithmetic decides, never the name. `yardstick`:
    the yardstick's own output where it is weaker than the bound (else None); an output
    beyond the bound that equals it bit for bit is `weak` (the weak-yardstick outcome),
    not a failure: whatever its name, that is the yardstick's arithmetic. `allowed`: a
    bound the caller computed (a training step's grown one, tolerances.step_allowed)
    instead of the op rule's."""
    name = spec.name
    original = actual
    if values.is_list(golden):
        shapes_a, shapes = values.shapes(actual), values.shapes(golden)
        if shapes_a != shapes:
            raise AssertionError(f"{name}: shapes {shapes_a} but golden has {shapes}")
        where = lambda i: _list_index(i, shapes)  # noqa: E731
        actual, golden = flat(actual), flat(golden)
    else:
        where = lambda i: _index(i, golden.shape)  # noqa: E731
    numel = golden.numel()
    if tuple(actual.shape) != tuple(golden.shape):
        raise AssertionError(f"{name}: shape {tuple(actual.shape)} but golden has "
                             f"{tuple(golden.shape)}")
    scale = golden_scale(golden)
    if allowed is None:
        allowed = tolerances.allowed_error(spec.tol_class, actual.dtype, case_dtype, ref_err,
                                           cond_err, scale=scale, terms=spec.terms)
    act, gold = actual.reshape(-1), golden.reshape(-1)
    n_unwritten = n_nonfinite = n_bad = 0
    first_unwritten = None
    best, fi = None, 0
    rel_maxima, sq_err, sq_gold = [], 0.0, 0.0
    for sl in _slices(numel):
        poisoned = is_poison(act[sl])
        n_poison = int(poisoned.sum())
        if n_poison and first_unwritten is None:
            first_unwritten = sl.start + int(poisoned.nonzero()[0])
        n_unwritten += n_poison
        a = act[sl].to(device=gold.device, dtype=torch.float64)
        g = gold[sl]
        finite = torch.isfinite(a)
        n_nonfinite += int((~finite).sum())
        diff = torch.where(finite, (a - g).abs(), torch.full_like(a, float("inf")))
        i = int(diff.argmax())
        v = diff[i].item()
        if _later_is_worse(best, v):
            best, fi = v, sl.start + i
        rel_maxima.append((diff / g.abs().clamp_min(1e-3 * scale)).max())
        sq_err += float(torch.where(finite, a - g, torch.zeros_like(a)).square().sum())
        sq_gold += float(g.square().sum())
        n_bad += int((diff > allowed * scale).sum())
    n_nonfinite -= n_unwritten
    if numel:
        max_abs = best
        max_rel = torch.stack(rel_maxima).max().item()
        gnorm = math.sqrt(sq_gold)
        rel_l2 = math.sqrt(sq_err) / (gnorm if gnorm > 0 else 1.0)
        worst = where(fi)
    else:
        max_abs = max_rel = rel_l2 = 0.0
        worst = "[]"
    err = max_abs / scale

    failure, message = None, ""
    if n_unwritten:
        first = where(first_unwritten)
        failure = FailureKind.UNWRITTEN
        message = (f"unwritten output {name}: {n_unwritten} of {numel} elements still hold "
                   f"the poison NaN (first at {first}): never written, or accumulated into "
                   f"without being set")
    elif n_nonfinite:
        failure = FailureKind.NONFINITE
        message = f"{name}: {n_nonfinite} of {numel} elements are NaN or inf (first at {worst})"
    weak = False
    if not failure and err > allowed:
        if yardstick is not None and bitwise_equal(original, yardstick):
            weak = True
            message = (f"{name} as weak as the yardstick: bit for bit the yardstick's own "
                       f"output, error {err:.3g} of max|golden| {scale:.3g} at {worst} > "
                       f"allowed {allowed:.3g} (fp32 with one rounding: the yardstick is "
                       f"weaker than that on this case)")
        else:
            failure = FailureKind.MISMATCH
            message = (f"{name} mismatch: error {err:.3g} of max|golden| {scale:.3g} at "
                       f"{worst} > allowed {allowed:.3g} "
                       f"({tolerances.describe(spec.tol_class, case_dtype, spec.terms)}, yardstick "
                       f"{ref_err:.3g}, conditioning {cond_err:.3g}); {n_bad} of {numel} "
                       f"elements beyond")
    return OutputCheck(name=name, tol_class=spec.tol_class.value, numel=numel, scale=scale,
                       err=err, ref_err=ref_err, cond_err=cond_err, allowed=allowed,
                       max_abs=max_abs, max_rel=max_rel, rel_l2=rel_l2, n_bad=n_bad,
                       n_nonfinite=n_nonfinite, n_unwritten=n_unwritten, worst_index=worst,
                       failure=failure, message=message, weak=weak)


def snapshot(tensors: Mapping[str, Optional[torch.Tensor]]) -> dict:
    """Copies of the input tensors (and of lists of them), for `modified_inputs`."""
    return {k: values.map_tensors(torch.clone, v) for k, v in tensors.items()
            if values.is_value(v)}


def _bits(t: torch.Tensor) -> torch.Tensor:
    if t.is_floating_point():
        return t.contiguous().view({1: torch.int8, 2: torch.int16, 4: torch.int32,
                                    8: torch.int64}[t.element_size()])
    return t


def bitwise_equal(a, b) -> bool:
    """Same shapes, dtypes and bits; a list equals a list of as many equal tensors."""
    if values.is_list(a) or values.is_list(b):
        return (values.is_list(a) and values.is_list(b)
                and len(a) == len(b) and all(bitwise_equal(x, y) for x, y in zip(a, b)))
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(_bits(a), _bits(b))


def modified_inputs(before: Mapping[str, torch.Tensor],
                    tensors: Mapping[str, Optional[torch.Tensor]]) -> list[str]:
    """Names of the input tensors whose bits changed since `before` was taken."""
    return [k for k, v in before.items() if not bitwise_equal(v, tensors[k])]


@dataclass(frozen=True)
class DeterminismCheck:
    result: Determinism
    repeats: int
    spread: float  # largest normalized difference between a repeat and the first call
    message: str


def classify_determinism(first: Mapping[str, torch.Tensor],
                         repeats: Sequence[Mapping[str, torch.Tensor]],
                         golden: Mapping[str, torch.Tensor],
                         allowed: Mapping[str, float]) -> DeterminismCheck:
    """Compare each repeat with the first call: bitwise, within tolerance, or fail."""
    n = 1 + len(repeats)
    if not repeats:
        return DeterminismCheck(Determinism.NOT_CHECKED, n, 0.0, "")
    spread, worst, beyond, differs = 0.0, "", [], False
    for r in repeats:
        for name, t in r.items():
            if bitwise_equal(t, first[name]):
                continue
            differs = True
            d = normalized_error(t, first[name])
            if d >= spread:
                spread, worst = d, name
            if normalized_error(t, golden[name]) > allowed[name]:
                beyond.append(name)
    if not differs:
        return DeterminismCheck(Determinism.BITWISE, n, 0.0, "")
    if beyond:
        return DeterminismCheck(Determinism.FAIL, n, spread,
                                f"repeats differ beyond tolerance in {sorted(set(beyond))}")
    return DeterminismCheck(Determinism.NONDETERMINISTIC, n, spread,
                            f"{worst} differs between repeats by up to {spread:.3g} "
                            f"of max|value| (within tolerance)")
