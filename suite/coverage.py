"""Coverage per implementation: which parameter values, and which pairs of values, each
implementation of a run actually ran, against what the run's cases offered.

Generic across ops: parameter names come from the rows' `params_json`, their kinds from the
op's `ParamSet` (`suite.registry.ops()`, when it imports) or else from the values' types.
For one op of a run (one or more results files, the latest row of each item):

- per parameter, the values an implementation **ran** (verdict pass or fail: its outputs
  were compared) against the values the op's cases **offered** (any implementation's
  rows), and why each missing value did not run (declared unsupported, error, timeout,
  or no item of that implementation holds it);
- per pair of parameters, the value pairs: offered pairs it ran, offered pairs it declared
  **unsupported** (and never ran), offered pairs it did not run otherwise, and, among the
  values it ran, the pairs that no case offered at all. A pair no case offered is
  **never exercised together** when some valid case could hold it that the implementation
  would support: one offered case that it ran, with one of the two parameters changed to
  the other value, passes the op's `check_case` and the implementation's `supports`
  (both taken from the registry where it has them; without them every such pair counts).
  The other not-offered pairs are **outside its features** (`supports` refuses every such
  case) or **not valid** (`check_case` refuses every one).

Numeric parameters (kinds int, float and int_list) with more than MAX_EXACT distinct
offered values are binned for the pairwise view, by their kind alone: int and float values
into power-of-two ranges (0 apart, negative values mirrored), and an int one also gets the
feature "<name> mod 8" (0 or 1-7); an int_list by its number of elements, in the same
ranges. Parameters with one offered value make no pairs.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Optional, Sequence

import numpy as np
import pandas as pd

from bwd_suite.suite.profiles import STEP_KIND

MAX_EXACT = 8  # a numeric parameter with more distinct offered values is binned for pairs
MODULUS = 8  # "<int param> mod 8": 0 or not, a feature of binned int parameters
CANDIDATES = 6  # offered cases tried per direction when testing a not-offered pair

RAN_VERDICTS = ("pass", "fail", "weak_yardstick")  # the outputs were compared
UNSUPPORTED = "unsupported"

# categories of a missing value pair
NEVER_TOGETHER = "never together"  # no case offered it; a valid, supported case would
UNSUPPORTED_PAIR = "unsupported"  # offered; declared unsupported, never ran
NOT_RUN = "not run"  # offered; neither ran nor declared unsupported (error, timeout, no item)
CATEGORY_ORDER = (NEVER_TOGETHER, UNSUPPORTED_PAIR, NOT_RUN)

# ways a parameter shows in the pairwise view
EXACT, POW2, MOD8, LENGTH = "exact", "powers of two", "mod 8", "number of elements"


# -- values and their labels ------------------------------------------------------------------

def value_label(v) -> str:
    """A parameter value as text: strings as they are, others as JSON (true, 1.0, [64, 8])."""
    if v is None:
        return "(unset)"
    if isinstance(v, str):
        return v
    return json.dumps(v)


def value_key(v) -> tuple:
    """Sort key of a parameter value: missing first, then numbers (bools as 0/1) in order,
    strings, lists."""
    if v is None:
        return (0, 0)
    if isinstance(v, (bool, int, float)):
        return (1, float(v) if isinstance(v, float) else int(v))
    if isinstance(v, str):
        return (2, v)
    if isinstance(v, (list, tuple)):
        return (3, len(v), tuple(value_key(x) for x in v))
    return (4, str(v))


def _pow2_int(v: int) -> tuple:
    """(label, key) of the power-of-two range holding integer v: 0, 1, 2-3, 4-7, ..."""
    if v == 0:
        return "0", (1, 0)
    lo = 1 << (abs(v).bit_length() - 1)
    hi = 2 * lo - 1
    text = str(lo) if lo == hi else f"{lo}-{hi}"
    return (text, (1, lo)) if v > 0 else (f"-({text})", (1, -lo))


def _pow2_float(v: float) -> tuple:
    """(label, key) of the half-open power-of-two range holding v: [0.25, 0.5), ..."""
    if v == 0 or not math.isfinite(v):
        return (value_label(v), (1, 0 if v == 0 else v))
    _, e = math.frexp(abs(v))  # |v| = m * 2**e, 0.5 <= m < 1
    lo, hi = math.ldexp(1.0, e - 1), math.ldexp(1.0, e)
    text = f"[{lo:g}, {hi:g})"
    return (text, (1, lo)) if v > 0 else (f"-{text}", (1, -lo))


@dataclass(frozen=True)
class Feature:
    """One column of the pairwise view: a parameter, exact or binned, or a derived one."""
    name: str  # as shown: the parameter's name, or "<name> mod 8", "len(<name>)"
    param: str
    kind: str
    how: str  # EXACT, POW2, MOD8 or LENGTH

    def label(self, v) -> tuple:
        """(label, sort key) of parameter value v in this feature."""
        if v is None:
            return value_label(v), (0, 0)
        if self.how == POW2:
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                return value_label(v), (2, value_key(v))
            return _pow2_int(v) if isinstance(v, int) else _pow2_float(float(v))
        if self.how == MOD8:
            if isinstance(v, bool) or not isinstance(v, int):
                return value_label(v), (2, value_key(v))
            return ("0", (1, 0)) if v % MODULUS == 0 else (f"1-{MODULUS - 1}", (1, 1))
        if self.how == LENGTH:
            return _pow2_int(len(v)) if isinstance(v, (list, tuple)) else \
                (value_label(v), (2, value_key(v)))
        return value_label(v), value_key(v)


def infer_kind(values: Iterable) -> str:
    """A parameter's kind from its values (no ParamSet): bool, int, float, int_list, str."""
    vals = [v for v in values if v is not None]
    if vals and all(isinstance(v, bool) for v in vals):
        return "bool"
    if vals and all(isinstance(v, int) and not isinstance(v, bool) for v in vals):
        return "int"
    if vals and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
        return "float"
    if vals and all(isinstance(v, (list, tuple)) for v in vals):
        return "int_list"
    return "str"


def features_of(param: str, kind: str, n_offered: int) -> tuple:
    """The pairwise features of one parameter, from its kind and how many distinct values
    its op's cases offer: exact up to MAX_EXACT values, binned beyond (the one rule)."""
    if kind in ("bool", "str") or n_offered <= MAX_EXACT:
        return (Feature(param, param, kind, EXACT),)
    if kind == "int":
        return (Feature(param, param, kind, POW2),
                Feature(f"{param} mod {MODULUS}", param, kind, MOD8))
    if kind == "float":
        return (Feature(param, param, kind, POW2),)
    return (Feature(f"len({param})", param, kind, LENGTH),)


def binning_text(features: Sequence[Feature]) -> str:
    """How a parameter shows in the pairwise view, in words."""
    hows = [f.how for f in features]
    if hows == [EXACT]:
        return "exact"
    if MOD8 in hows:
        return f"powers of two, and mod {MODULUS} (0 or not)"
    return hows[0]


# -- the registry, when it imports ------------------------------------------------------------

@dataclass(frozen=True)
class OpInfo:
    """What the registry says about an op: its parameters' order and kinds, `check_case`,
    and the implementations' `supports`, by name."""
    order: tuple = ()
    kinds: Mapping = None
    check_case: Optional[Callable] = None
    supports: Mapping = None  # impl name -> supports(params)


@functools.lru_cache(maxsize=1)
def registry_info() -> dict:
    """op -> OpInfo from suite.registry; {} when the registry does not import (no torch)."""
    try:
        from bwd_suite.suite import registry

        ops = registry.ops()
        impls = registry.implementations()
    except Exception:  # noqa: BLE001 - a view: fall back to the values' types
        return {}
    out = {}
    for name, spec in ops.items():
        params = spec.params.params
        out[name] = OpInfo(order=tuple(p.name for p in params),
                           kinds={p.name: p.kind for p in params},
                           check_case=spec.check_case,
                           supports={i.name: i.supports for i in impls if i.op == name})
    return out


# -- results ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class MissingValue:
    value: str
    why: str  # unsupported, error, timeout, no item (or another verdict)
    reason: str  # its unsupported reasons, the two most common ("" otherwise)


@dataclass(frozen=True)
class ParamCoverage:
    param: str
    kind: str
    offered: tuple  # value labels, in order
    ran: tuple
    missing: tuple  # MissingValue per offered value it did not run

    @property
    def complete(self) -> bool:
        return not self.missing


@dataclass(frozen=True)
class PairCounts:
    feature_pairs: int  # pairs of features with two or more offered values each
    offered: int  # value pairs some case offered
    ran: int
    unsupported: int  # offered, declared unsupported, never ran
    unsupported_pair: int  # ... of which both values ran elsewhere (the pair is the limit)
    not_run: int  # offered, neither ran nor declared unsupported
    not_run_pair: int  # ... of which both values ran elsewhere
    not_offered: int  # of the values it ran, pairs no case offered
    never_together: int  # ... that a valid, supported case would hold: the gaps
    outside: int  # ... that it would declare unsupported
    invalid: int  # ... that no valid case holds


@dataclass(frozen=True)
class FeaturePair:
    """The value pairs of two features (parameters, binned where numeric with many values)."""
    a: str
    b: str
    counts: PairCounts


@dataclass(frozen=True)
class PairGap:
    category: str  # NEVER_TOGETHER, UNSUPPORTED_PAIR or NOT_RUN
    a_feature: str
    a: str
    b_feature: str
    b: str
    n_items: int  # the implementation's items holding the pair (0: never together)
    note: str  # unsupported: its reasons; not run: the verdicts; never together: an example

    @property
    def text(self) -> str:
        return f"{self.a_feature}={self.a} x {self.b_feature}={self.b}"


@dataclass(frozen=True)
class ImplCoverage:
    op: str
    impl: str
    impl_kind: str
    n_items: int
    verdicts: tuple  # (verdict, n), most first
    unsupported_reasons: tuple  # (reason, n), most first
    params: tuple  # ParamCoverage
    pairs: PairCounts
    feature_pairs: tuple  # FeaturePair per pair of features
    missing_pairs: tuple  # PairGap, every one: never together, unsupported, not run
    checked: str  # what told not-offered pairs apart: "check_case and supports", ...

    @property
    def n_ran(self) -> int:
        return sum(n for v, n in self.verdicts if v in RAN_VERDICTS)

    @property
    def gaps(self) -> tuple:
        return tuple(g for g in self.missing_pairs if g.category == NEVER_TOGETHER)


@dataclass(frozen=True)
class Binning:
    op: str
    param: str
    kind: str
    n_offered: int
    how: str  # binning_text
    features: tuple  # feature names


@dataclass(frozen=True)
class Coverage:
    impls: tuple  # ImplCoverage, by op then implementation
    binning: tuple  # Binning, per op and parameter
    n_rows: int

    def ops(self) -> list:
        return list(dict.fromkeys(c.op for c in self.impls))


# -- computing it -----------------------------------------------------------------------------

def _latest(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (op, case_id, impl), the latest run's, where several runs hold one."""
    if {"case_id", "run_started"} <= set(df.columns):
        from bwd_suite.suite.regression import latest_rows

        return latest_rows(df)
    return df.reset_index(drop=True)


def _parse(texts) -> tuple:
    """params_json per row as dicts (a bad or missing one as {}), each distinct text parsed
    once; and per row the index of its distinct text."""
    cache: dict = {}
    out, ids = [], []
    for t in texts:
        if t not in cache:
            try:
                d = json.loads(t) if isinstance(t, str) else {}
            except ValueError:
                d = {}
            cache[t] = (d if isinstance(d, dict) else {}, len(cache))
        d, k = cache[t]
        out.append(d)
        ids.append(k)
    return out, np.asarray(ids, dtype=np.int64)


def _hashable(v):
    return tuple(_hashable(x) for x in v) if isinstance(v, list) else v


def _top(counter: Counter, n: Optional[int] = None) -> tuple:
    return tuple(sorted(counter.items(), key=lambda kv: (-kv[1], str(kv[0])))[:n])


def _reasons(counter: Counter, n: int = 2) -> str:
    """The unsupported reasons of some items, most common first, the first `n`."""
    top = _top(counter)
    text = "; ".join(r for r, _ in top[:n])
    return text + (f"; and {len(top) - n} more reasons" if len(top) > n else "")


@dataclass
class _Op:
    """One op's rows, encoded: per row its parameter values and feature codes."""
    name: str
    params: list  # names, in ParamSet order, then the others by name
    kinds: dict
    raw: list  # per row, its params dict
    raw_ids: np.ndarray  # per row, the index of its distinct params
    impl: np.ndarray  # per row, the implementation's name
    verdict: np.ndarray
    reason: np.ndarray
    case_id: np.ndarray
    value_codes: dict  # param -> (codes per row, labels, raw value per code)
    features: list  # Feature, with at least two offered labels (the pairwise view)
    codes: np.ndarray  # rows x features
    labels: list  # per feature, its labels
    raws: list  # per feature and label, the raw values (offered), in order
    info: OpInfo
    binning: list
    pairs: dict = field(default_factory=dict)

    def pair(self, i: int, j: int) -> tuple:
        """Per row the code of its value pair of features i and j, and the offered codes
        (computed once per op, shared by its implementations)."""
        if (i, j) not in self.pairs:
            codes = self.codes[:, i] * len(self.labels[j]) + self.codes[:, j]
            self.pairs[(i, j)] = codes, set(np.unique(codes).tolist())
        return self.pairs[(i, j)]


def _encode(values: list, label: Callable) -> tuple:
    """Codes per row of `values`, by label in sort order; the labels; per label the raw
    values it holds (sorted)."""
    by_value: dict = {}  # hashable value -> its label
    by_label: dict = {}  # label -> [sort key, {hashable value: value}]
    per_row = []
    for v in values:
        h = _hashable(v)
        text = by_value.get(h)
        if text is None:
            text, key = label(v)
            by_value[h] = text
            entry = by_label.setdefault(text, [key, {}])
            entry[1].setdefault(h, v)
        per_row.append(text)
    ordered = sorted(by_label, key=lambda t: (by_label[t][0], t))
    index = {t: i for i, t in enumerate(ordered)}
    codes = np.fromiter((index[t] for t in per_row), dtype=np.int64, count=len(per_row))
    raws = [sorted(by_label[t][1].values(), key=value_key) for t in ordered]
    return codes, ordered, raws


def _op_frame(name: str, rows: pd.DataFrame, info: OpInfo) -> _Op:
    raw, raw_ids = _parse(rows["params_json"].tolist())
    seen = set().union(*raw) if raw else set()
    order = [p for p in info.order if p in seen] + sorted(seen - set(info.order))
    kinds, value_codes, features, codes, labels, raws, binning = {}, {}, [], [], [], [], []
    # encoded once per distinct params (a case's rows of every implementation share them)
    distinct = [None] * (int(raw_ids.max()) + 1 if len(raw_ids) else 0)
    for d, k in zip(raw, raw_ids.tolist()):
        distinct[k] = d

    def encode(values, label):
        c, lab, rw = _encode(values, label)
        return c[raw_ids], lab, rw

    for p in order:
        values = [d.get(p) for d in distinct]
        kind = (info.kinds or {}).get(p) or infer_kind(values)
        kinds[p] = kind
        exact = Feature(p, p, kind, EXACT)
        value_codes[p] = encode(values, exact.label)
        n_offered = len(value_codes[p][1])
        feats = features_of(p, kind, n_offered)
        binning.append(Binning(name, p, kind, n_offered, binning_text(feats),
                               tuple(f.name for f in feats)))
        for f in feats:
            c, lab, rw = value_codes[p] if f.how == EXACT else encode(values, f.label)
            if len(lab) < 2:
                continue  # one value: no pairs to tell apart
            features.append(f)
            codes.append(c)
            labels.append(lab)
            raws.append(rw)
    n = len(rows)
    return _Op(
        name=name, params=order, kinds=kinds, raw=raw, raw_ids=raw_ids,
        impl=rows["impl"].astype(str).to_numpy(),
        verdict=rows["verdict"].astype(str).to_numpy(),
        reason=rows["reason"].fillna("").astype(str).to_numpy() if "reason" in rows
        else np.full(n, "", dtype=object),
        case_id=rows["case_id"].astype(str).to_numpy() if "case_id" in rows
        else np.full(n, "", dtype=object),
        value_codes=value_codes, features=features,
        codes=np.stack(codes, axis=1) if codes else np.zeros((n, 0), dtype=np.int64),
        labels=labels, raws=raws, info=info, binning=binning)


def _param_coverage(op: _Op, mine: np.ndarray, ran: np.ndarray) -> tuple:
    out = []
    for p in op.params:
        codes, labels, _ = op.value_codes[p]
        ran_codes = set(np.unique(codes[mine & ran]).tolist())
        missing = []
        for c, text in enumerate(labels):
            if c in ran_codes:
                continue
            rows = mine & (codes == c)
            verdicts = Counter(op.verdict[rows].tolist())
            if verdicts.get(UNSUPPORTED):
                reasons = Counter(op.reason[rows & (op.verdict == UNSUPPORTED)].tolist())
                missing.append(MissingValue(text, UNSUPPORTED, _reasons(reasons)))
            elif verdicts:
                missing.append(MissingValue(text, _top(verdicts, 1)[0][0], ""))
            else:
                missing.append(MissingValue(text, "no item", ""))
        out.append(ParamCoverage(p, op.kinds[p], tuple(labels),
                                 tuple(labels[c] for c in sorted(ran_codes)), tuple(missing)))
    return tuple(out)


def _candidate_status(op: _Op, supports: Optional[Callable], bases: Iterable) -> tuple:
    """(status, example) of a not-offered pair from candidate cases (case id, params):
    NEVER_TOGETHER when one is valid and supported, "outside" when valid ones exist but
    `supports` refuses them all, "invalid" when `check_case` refuses every one."""
    outside = None
    for case_id, params, changed in bases:
        if op.info.check_case is not None:
            try:
                if op.info.check_case(params) is not None:
                    continue
            except Exception:  # noqa: BLE001 - a case the op cannot even check
                continue
        if supports is not None:
            try:
                if supports(params) is not None:
                    outside = outside or (case_id, changed)
                    continue
            except Exception:  # noqa: BLE001
                outside = outside or (case_id, changed)
                continue
        return NEVER_TOGETHER, f"e.g. {case_id} with {changed}"
    return ("outside", "") if outside else ("invalid", "")


def _bases(op: _Op, fi: int, code: int, fj: int, code_j: int, ran_rows: np.ndarray):
    """Candidate cases for the pair (feature fi = code, feature fj = code_j): cases this
    implementation ran with fi's value, with fj's parameter changed to a value of code_j
    (id of the case, its params, the change), CANDIDATES distinct cases at most."""
    fj_param = op.features[fj].param
    holders = ran_rows[(op.codes[ran_rows, fi] == code)]
    values = op.raws[fj][code_j][:2]
    seen = set()
    for r in holders:
        if op.raw_ids[r] in seen:
            continue
        seen.add(op.raw_ids[r])
        for v in values:
            params = dict(op.raw[r])
            params[fj_param] = v
            yield op.case_id[r], params, f"{fj_param}={value_label(v)}"
        if len(seen) >= CANDIDATES:
            return


def _pairs(op: _Op, mine: np.ndarray, ran: np.ndarray, uns: np.ndarray,
           supports: Optional[Callable]) -> tuple:
    """(PairCounts over every feature pair, FeaturePair per feature pair, the missing pairs
    in listing order) of one implementation."""
    total = Counter()
    per_pair, gaps = [], []
    ran_rows = np.flatnonzero(mine & ran)
    uns_rows = np.flatnonzero(mine & uns)
    mine_rows = np.flatnonzero(mine)
    weights = [np.bincount(op.codes[ran_rows, f], minlength=len(op.labels[f]))
               for f in range(len(op.features))]
    ran_values = [set(np.flatnonzero(w).tolist()) for w in weights]
    for i in range(len(op.features)):
        for j in range(i + 1, len(op.features)):
            fa, fb = op.features[i], op.features[j]
            if fa.param == fb.param:
                continue  # a parameter's range and its mod 8: not two features
            counts = Counter(feature_pairs=1)
            found = []
            nb = len(op.labels[j])
            pair, offered = op.pair(i, j)
            ran_pairs = set(np.unique(pair[ran_rows]).tolist())
            uns_count = Counter(pair[uns_rows].tolist())
            counts["offered"] += len(offered)
            counts["ran"] += len(ran_pairs)

            def gap(category, code, n_items, note):
                a, b = divmod(code, nb)
                na, nb_ = int(weights[i][a]), int(weights[j][b])
                weight = (n_items, 0) if n_items else (min(na, nb_), na * nb_)
                found.append((weight, i, a, j, b, PairGap(
                    category, fa.name, op.labels[i][a], fb.name, op.labels[j][b],
                    n_items, note)))

            for code in sorted(offered - ran_pairs):
                a, b = divmod(code, nb)
                both = a in ran_values[i] and b in ran_values[j]
                rows = mine_rows[pair[mine_rows] == code]
                if uns_count.get(code):
                    counts["unsupported"] += 1
                    counts["unsupported_pair"] += both
                    if both:
                        reasons = Counter(op.reason[rows[op.verdict[rows] == UNSUPPORTED]]
                                          .tolist())
                        gap(UNSUPPORTED_PAIR, code, len(rows), _reasons(reasons))
                else:
                    counts["not_run"] += 1
                    counts["not_run_pair"] += both
                    if both:
                        verdicts = Counter(op.verdict[rows].tolist())
                        note = ", ".join(f"{n} {v}" for v, n in _top(verdicts)) or \
                            "no item of this implementation"
                        gap(NOT_RUN, code, len(rows), note)
            for a in sorted(ran_values[i]):
                for b in sorted(ran_values[j]):
                    code = a * nb + b
                    if code in offered:
                        continue
                    counts["not_offered"] += 1
                    bases = itertools.chain(_bases(op, i, a, j, b, ran_rows),
                                            _bases(op, j, b, i, a, ran_rows))
                    status, example = _candidate_status(op, supports, bases)
                    counts[status.replace(" ", "_")] += 1
                    if status == NEVER_TOGETHER:
                        gap(NEVER_TOGETHER, code, 0, example)
            total.update(counts)
            per_pair.append(FeaturePair(fa.name, fb.name, _counts(counts)))
            # within a feature pair and category, the pairs of the most items (or of the
            # values it runs most) first: their place there is the listing's first key
            found.sort(key=lambda g: (g[5].category, -g[0][0], -g[0][1], g[2], g[4]))
            place = Counter()
            for g in found:
                place[g[5].category] += 1
                gaps.append((place[g[5].category], *g))
    rank = {c: k for k, c in enumerate(CATEGORY_ORDER)}
    # never together first, then unsupported, then not run; each feature pair's first
    # pair before any one's second, so that a capped listing shows many feature pairs
    gaps.sort(key=lambda g: (rank[g[6].category], g[0], -g[1][0], -g[1][1], g[2], g[3],
                             g[4], g[5]))
    return _counts(total), tuple(per_pair), tuple(g[6] for g in gaps)


def _counts(counter: Counter) -> "PairCounts":
    return PairCounts(**{k: int(counter.get(k, 0)) for k in PairCounts.__dataclass_fields__})


def _checked(info: OpInfo, supports) -> str:
    parts = (["check_case"] if info.check_case is not None else []) + \
        (["supports"] if supports is not None else [])
    return " and ".join(parts) or "nothing (not in the registry)"


def compute(df, impls: Optional[Iterable[str]] = None, op: Optional[str] = None,
            registry: Optional[Mapping] = None) -> Coverage:
    """Coverage of every implementation (or those named) of every op (or `op`) in a
    results frame (`suite.results.read_results`), or in typed rows (`ResultRow`s).
    `registry`: op -> OpInfo (default: `registry_info()`; {} for none)."""
    info = registry_info() if registry is None else registry
    if df is not None and not isinstance(df, pd.DataFrame):
        df = pd.DataFrame([r.to_record() if hasattr(r, "to_record") else dict(r) for r in df])
    needed = {"op", "impl", "verdict", "params_json"}
    if df is None or df.empty or not needed <= set(df.columns):
        return Coverage((), (), 0 if df is None else len(df))
    rows = _latest(df)
    wanted = None if impls is None else set(impls)
    kinds = {}
    if "impl_kind" in rows:
        kinds = dict(zip(rows["impl"].astype(str), rows["impl_kind"].fillna("").astype(str)))
    out, binning = [], []
    for name in sorted(set(rows["op"].astype(str))):
        # a training-step scenario's row is no op's case: its keys are a model's, and its
        # checks are judged by suite/step/ (its coverage is its checks)
        if (op is not None and name != op) or name == STEP_KIND:
            continue
        of_op = rows[rows["op"].astype(str) == name].reset_index(drop=True)
        op_info = info.get(name, OpInfo())
        data = _op_frame(name, of_op, op_info)
        binning += data.binning
        ran = np.isin(data.verdict, RAN_VERDICTS)
        uns = data.verdict == UNSUPPORTED
        for impl in sorted(set(data.impl.tolist())):
            if wanted is not None and impl not in wanted:
                continue
            mine = data.impl == impl
            supports = (op_info.supports or {}).get(impl)
            counts, per_pair, gaps = _pairs(data, mine, ran, uns, supports)
            verdicts = Counter(data.verdict[mine].tolist())
            reasons = Counter(data.reason[mine & uns].tolist())
            out.append(ImplCoverage(
                op=name, impl=impl, impl_kind=kinds.get(impl, ""), n_items=int(mine.sum()),
                verdicts=_top(verdicts), unsupported_reasons=_top(reasons),
                params=_param_coverage(data, mine, ran), pairs=counts,
                feature_pairs=per_pair, missing_pairs=gaps,
                checked=_checked(op_info, supports)))
    return Coverage(tuple(out), tuple(binning), len(rows))
