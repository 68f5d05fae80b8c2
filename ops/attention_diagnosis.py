"""What the attention op's axes and features mean to the failure diagnosis.

dq has the axes (batch, head, query, dim), dk and dv (batch, kv_head, key, dim). The
period search of `suite/diagnosis/` finds where along them the wrong elements sit (the
keys past the last multiple of the key block, fixed rows of each query block, ...); this
module adds one region (the queries that see no key), the reference terms, the case
features, the causes and the rules from evidence to cause.

Terms are the float64 backward a FlashAttention-style kernel computes from the saved
statistics (P = exp(S - lse), D = rowsum(dO * o)), under the hypothesis of each bug minus
the same backward without it, so that the rounding of the saved o and lse cancels:

    the gradient itself (a constant factor), times (scale - 1) (the scale applied twice in
    dS) or (1/scale - 1) (left out); D = 0; D as a column sum over the queries; dk and dv
    of each key/value head from the first query head of its group; dv - dk and dk - dv
    (swapped); the visibility of the other causal corner; the window one key wider or
    narrower at either edge; the backward computed otherwise (a Variant): query head h
    reading key/value head h % Hkv, the softcap derivative at the capped score, the
    scores rounded to a 16-bit input dtype, padding tokens seeing each other.

Each says "error = 1 x term" when its hypothesis is the bug. A hypothesis that changes
the visibility or the backward (a Story) needs a pass of its own, and a second one with
the forward recomputed under it (lse and o of the wrong visibility: a kernel whose own
forward has the bug too, as a two-phase implementation's, or that recomputes the softmax)
against the golden, where the two differ; the others share one pass. Terms are computed
for CPU-sized cases only (MAX_TERM_SCORES): each pass is a float64 backward. Where no
story explains the error, a gradient on the rows that see no key (the golden's is 0)
names its own cause. That backward, and the visibility in closed form, are in
ops/attention_saved_backward.py.

The causes and the tile sizes they are stated in (BLOCK_K, BLOCK_Q) are in
ops/attention_causes.py, shared with the mutants that plant them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Optional

from bwd_suite.golden import attention as golden
from bwd_suite.ops.attention_causes import BLOCK_K, BLOCK_Q, Cause
from bwd_suite.ops.attention_saved_backward import (EXACT, Variant, band, offset, row_bounds,
                                                    saved_backward, seen_rows)
from bwd_suite.suite import inputs as mk
from bwd_suite.suite.diagnosis import (COEF_TOL, EXACT_RESIDUAL, GENERIC_RULES, CauseSpec,
                                       DiagnosisSpec, Evidence, Feature, Hypotheses, Region,
                                       Rule, Term, generic_causes, ordered, precision_rule)

# score elements (batch x heads x Tq x Tk) up to which terms are computed: a pass costs a
# float64 backward, a handful of them per failing item (the ci cases are below 1/4 of it)
MAX_TERM_SCORES = 1 << 23
# a boolean mask over a row of at most this many keys counts as hiding a row whole (the ci
# cases of 1 and 2 keys had such rows)
MASK_FEW_KEYS = 3
OUTPUTS = ("dq", "dk", "dv")


# ---------------------------------------------------------------- case features

# the parameters that rows stored before seq_q, seq_k and the features existed lack, at
# the values those runs had (one length for both; no alignment, window, softcap, mask or
# dropout): a stored run stays readable by the run-level diagnosis
_BEFORE_FEATURES = {"align": "top_left", "window_left": -1, "window_right": -1,
                    "softcap": 0.0, "mask": "none", "mask_heads": 1, "mask_scale": 1.0,
                    "dropout": 0.0}


def with_defaults(p: Mapping) -> dict:
    """The case parameters, those of older stored rows completed (_BEFORE_FEATURES)."""
    full = {**_BEFORE_FEATURES, **p}
    if "seq" in p:
        full.setdefault("seq_q", p["seq"])
        full.setdefault("seq_k", p["seq"])
    return full


def _scale(p: Mapping) -> float:
    return p["softmax_scale"] or 1.0 / math.sqrt(p["head_dim"])


def _empty_rows(p: Mapping, first, last) -> bool:
    """Some query sees no key: by the rules, by padding (packed_padded pads T // 4 tokens
    of the last row), or, likely, by a boolean mask over a row of few keys (it hides about
    one pair in 10 by a hash the parameters do not show: a row of k keys whole about one
    time in 10^k)."""
    n = last - first + 1
    if bool((n <= 0).any()) or (p["packing"] == "packed_padded" and p["seq_q"] >= 4):
        return True
    return p["mask"] == "bool" and int(n.min()) <= MASK_FEW_KEYS


def case_features(p: Mapping) -> dict:
    p = with_defaults(p)
    Tq, Tk = p["seq_q"], p["seq_k"]
    rules = p["mask"] == "none"  # an explicit mask holds the whole visibility
    windowed = p["window_left"] >= 0 or p["window_right"] >= 0
    first, last = row_bounds(Tq, Tk, offset(p), *band(p))
    return {
        "unequal": Tq != Tk,
        "causal": bool(p["causal"]),
        "windowed": windowed and rules,
        "window_left": p["window_left"] >= 0 and rules,
        # the corner moves the visibility: causal or windowed, lengths apart, no mask
        "corner": Tq != Tk and (p["causal"] or windowed) and rules,
        "grouped": p["kv_heads"] < p["heads"],
        "empty_rows": _empty_rows(p, first, last),
        "explicit_mask": not rules,
        "scaled": _scale(p) != 1.0,
        "softcap": p["softcap"] > 0,
        "dropout": p["dropout"] > 0,
        "packed": p["packing"] != "none",
        "partial_key_block": Tk % BLOCK_K != 0,
        "partial_query_block": Tq % BLOCK_Q != 0,
        "multi_key_block": Tk > BLOCK_K,
        "multi_query_block": Tq > BLOCK_Q,
        "low_precision": p["dtype"] != "float32",
        "saturated": p["logit_scale"] >= 10,
        "seq_q": Tq,
        "seq_k": Tk,
    }


FEATURES = (
    Feature("unequal", "when seq_q != seq_k"),
    Feature("causal", "with causal"),
    Feature("windowed", "with a sliding window (and no explicit mask)",
            implies=("not explicit_mask",)),
    Feature("window_left", "with a left window edge (and no explicit mask)",
            implies=("windowed", "not explicit_mask")),
    Feature("corner", "when the causal corner matters (causal or windowed, seq_q != seq_k, "
            "no explicit mask)", implies=("unequal", "not explicit_mask")),
    Feature("grouped", "with grouped-query heads (kv_heads < heads)"),
    Feature("empty_rows", "with queries that see no key"),
    Feature("explicit_mask", "with an explicit mask"),
    Feature("scaled", "with a softmax scale other than 1"),
    Feature("softcap", "with softcap"),
    Feature("dropout", "with dropout"),
    Feature("packed", "with packed sequences"),
    Feature("partial_key_block", f"when seq_k is not a multiple of {BLOCK_K}"),
    Feature("partial_query_block", f"when seq_q is not a multiple of {BLOCK_Q}"),
    Feature("multi_key_block", f"with more than {BLOCK_K} keys"),
    Feature("multi_query_block", f"with more than {BLOCK_Q} queries"),
    Feature("low_precision", "with 16-bit inputs"),
    Feature("saturated", "with near one-hot rows (logit scale >= 10)"),
    Feature("seq_q", "the number of queries", numeric=True),
    Feature("seq_k", "the number of keys", numeric=True),
)

AXES = {"dq": ("batch", "head", "query", "dim"), "dk": ("batch", "kv_head", "key", "dim"),
        "dv": ("batch", "kv_head", "key", "dim")}
PERIODS = {"query": (BLOCK_Q,), "key": (BLOCK_K,)}


def shapes(p: Mapping) -> dict:
    p = with_defaults(p)
    B, d = p["batch"], p["head_dim"]
    kv = (B, p["kv_heads"], p["seq_k"], d)
    return {"dq": (B, p["heads"], p["seq_q"], d), "dk": kv, "dv": kv}


def regions(p: Mapping, t: Mapping, output: str, shape: tuple) -> list:
    """dq: the queries that see no key (their gradient is 0; a NaN there is a missing
    guard on lse = -inf)."""
    if output != "dq":
        return []
    empty = ~seen_rows(p, t)
    if not bool(empty.any()):
        return []
    return [Region("empty_rows", "the queries that see no key", empty.unsqueeze(-1))]


# ---------------------------------------------------------------- terms

@dataclass(frozen=True)
class Story:
    """A backward computed otherwise than the case says, as a bug would: with another
    visibility (offset and band) or a Variant; against the saved statistics, the forward
    recomputed under it (`fresh`: a kernel whose forward has the bug too, or that
    recomputes the softmax), or both."""

    words: str
    off: int
    lo: Optional[int]
    hi: Optional[int]
    variant: Variant = EXACT
    saved: bool = True
    fresh: bool = True


def _hypotheses(p: Mapping) -> dict:
    """{name: Story}: visibilities other than the case's that a bug may use in place of
    it (the rules only: an explicit mask is used as it is), and the variants of the
    backward that apply to the case."""
    off, (lo, hi) = offset(p), band(p)
    found = {}
    H, Hkv = p["heads"], p["kv_heads"]
    if 1 < Hkv < H:  # with one key/value head, or as many as query heads, h % Hkv is right
        found["gqa_interleaved"] = Story(
            "query head h reading key/value head h % Hkv", off, lo, hi,
            Variant(kv_interleaved=True))
    if p["softcap"] > 0:  # P is the same: the saved statistics hold
        found["softcap_at_capped"] = Story(
            "the softcap derivative at the capped score", off, lo, hi,
            Variant(softcap_at_capped=True), fresh=False)
    dt = mk.DTYPES[p["dtype"]]
    if dt.itemsize < 4:
        for rounding, how in (("once", "rounded to"), ("product", "formed in")):
            name = "scores_16bit" + ("" if rounding == "once" else "_product")
            found[name] = Story(f"the scores {how} {p['dtype']}", off, lo, hi,
                                Variant(scores_dtype=dt, scores_rounding=rounding))
    if p["mask"] != "none":
        return found
    if p["packing"] == "packed_padded":  # padding rows have lse = -inf: saved, P = 0
        found["padding_sees_padding"] = Story(
            "padding tokens seeing each other", off, lo, hi,
            Variant(padding_sees_padding=True), saved=False)
    if p["seq_q"] != p["seq_k"] and (lo is not None or hi is not None):
        other = "top_left" if p["align"] == "bottom_right" else "bottom_right"
        found["other_corner"] = Story("the visibility of the other causal corner",
                                      offset(p, other), lo, hi)
    if p["window_left"] >= 0:
        found["window_edge_left_in"] = Story("the window one key narrower on the left", off,
                                             lo + 1, hi)
        found["window_edge_left_out"] = Story("the window one key wider on the left", off,
                                              lo - 1, hi)
    if p["window_right"] >= 0:
        found["window_edge_right_in"] = Story("the window one key narrower on the right",
                                              off, lo, hi - 1)
        found["window_edge_right_out"] = Story("the window one key wider on the right",
                                               off, lo, hi + 1)
    return found


def terms(p: Mapping, t: Mapping, attrs: Mapping, ev: Evidence) -> dict:
    """Every term of the wrong, finite outputs (nothing when some output is not finite:
    no hypothesis below makes NaN or leaves an output unwritten)."""
    wrong = set(ev.wrong)
    if not wrong or set(ev.wrong_counts) - wrong:
        return {}
    B, H, Tq, _ = t["q"].shape
    if B * H * Tq * t["k"].shape[2] > MAX_TERM_SCORES:
        return {}
    grouped = t["k"].shape[1] < H
    # D and the scale act on dq and dk, never on dv
    d_modes = ("rows", "zero", "columns") if wrong & {"dq", "dk"} and "dv" not in wrong \
        else ("rows",)
    res = saved_backward(p, t, attrs, offset(p), *band(p), d_modes=d_modes,
                         first_head=grouped and "dq" not in wrong)
    base = res["rows"]
    found = {o: [Term("scaled", f"{o} itself", base[o])] for o in wrong}
    scale = attrs["scale"]
    for o in wrong & {"dq", "dk"}:
        if "zero" in res:
            found[o].append(Term("d_missing", "the D term missing (D = 0)",
                                 res["zero"][o] - base[o]))
            found[o].append(Term("d_axis", "D as a column sum over the queries",
                                 res["columns"][o] - base[o]))
            if scale != 1:
                found[o].append(Term("scale_twice", f"{o} times (scale - 1)",
                                     (scale - 1) * base[o]))
                found[o].append(Term("scale_missing", f"{o} times (1/scale - 1)",
                                     (1 / scale - 1) * base[o]))
    if {"dk", "dv"} <= wrong:
        found["dk"].append(Term("swap", "dv - dk", base["dv"] - base["dk"]))
        found["dv"].append(Term("swap", "dk - dv", base["dk"] - base["dv"]))
    if "first_head" in res:
        for o in wrong & {"dk", "dv"}:
            found[o].append(Term("gqa_first_head", "the other query heads' share of the group",
                                 res["first_head"][o] - base[o]))
    hypotheses = _hypotheses(p)
    if any(h.fresh for h in hypotheses.values()):
        # the same with the forward recomputed: minus the case's own recomputed backward
        # (the golden, up to float64 rounding), not the saved statistics' one
        fresh = saved_backward(p, t, attrs, offset(p), *band(p), recompute=True)["rows"]
    for name, h in hypotheses.items():
        if h.saved:
            other = saved_backward(p, t, attrs, h.off, h.lo, h.hi, variant=h.variant)["rows"]
            for o in wrong:
                found[o].append(Term(name, h.words, other[o] - base[o]))
        if h.fresh:
            other = saved_backward(p, t, attrs, h.off, h.lo, h.hi, recompute=True,
                                   variant=h.variant)["rows"]
            for o in wrong:
                found[o].append(Term(f"{name}_forward", f"{h.words}, the forward's as well",
                                     other[o] - fresh[o]))
    return found


# ---------------------------------------------------------------- causes and rules

def _any(family: str, outputs=OUTPUTS):
    return lambda e: any(e.explains(o, family, 1.0) for o in outputs)


def _scaled(e: Evidence) -> bool:
    """A wrong output is c x itself for some c (not ~0, not -1: an output left at zero is
    no scale), exactly, and no named scale bug fits."""
    return any(e.finite(o) and any(abs(t.coef) > COEF_TOL and abs(t.coef + 1) > COEF_TOL
                                   and t.residual <= EXACT_RESIDUAL
                                   for t in e.fit(o, "scaled")) for o in OUTPUTS) \
        and not _any("scale_twice")(e) and not _any("scale_missing")(e)


def _key_tail(e: Evidence) -> bool:
    """dk or dv wrong exactly past the last multiple of BLOCK_K keys; or, when every key
    is in the one partial block, dk and dv unwritten whole while dq is finite."""
    for o in ("dk", "dv"):
        pat = e.along(o, "key")
        if pat is not None and pat.past_multiple_of(BLOCK_K):
            return True
    whole = all(o in e.nonfinite and e.wrong_counts.get(o, (0, 1))[0]
                == e.wrong_counts.get(o, (0, 1))[1] for o in ("dk", "dv"))
    return whole and e.f("seq_k") < BLOCK_K and "dq" not in e.nonfinite


C = Cause
CAUSES = (
    CauseSpec(C.CAUSAL_CORNER, "causal mask aligned to the wrong corner",
              "the diagonal offset: j <= i + (Tk - Tq) bottom-right (FlashAttention), j <= i "
              "top-left (PyTorch's is_causal); the window's centre follows it",
              requires=lambda f: f["corner"]),
    CauseSpec(C.GQA_GROUP_SUM, "grouped-query dk/dv not summed over the group",
              "dk, dv of a key/value head are sums over all H / Hkv query heads that read it",
              requires=lambda f: f["grouped"]),
    CauseSpec(C.GQA_INTERLEAVED, "grouped-query heads interleaved: query head h reads "
              "key/value head h % Hkv, not h // (H / Hkv)",
              "the H / Hkv query heads of a group are consecutive: key/value head h // "
              "(H / Hkv), in the loads and in the sums of dk and dv",
              requires=lambda f: f["grouped"]),
    CauseSpec(C.DS_SCALE_MISSING, "softmax scale missing in dS (dq, dk)",
              "dQ = scale dS K and dK = scale dSᵀ Q: the scale of S = scale Q Kᵀ comes back",
              requires=lambda f: f["scaled"]),
    CauseSpec(C.DS_SCALE_TWICE, "softmax scale applied twice in dS (dq, dk)",
              "the scale once: in dS or in the products, not both (q pre-scaled and scaled "
              "again)", requires=lambda f: f["scaled"]),
    CauseSpec(C.D_MISSING, "D = rowsum(dO * o) missing",
              "dS = P (dP - D), D the row dot of dO and the saved o, computed before the loops"),
    CauseSpec(C.D_AXIS, "D reduced over the wrong axis",
              "D is one value per query: rowsum(dO * o) over the head dim, or rowsum(P * dP) "
              "over the keys; not a sum over the queries"),
    CauseSpec(C.EMPTY_ROWS_NAN, "rows that see no key give NaN (lse = -inf unguarded)",
              "exp(S - lse) with lse = -inf: read it as +inf (P = 0), or guard the row",
              requires=lambda f: f["empty_rows"]),
    CauseSpec(C.EMPTY_ROWS_GRAD, "rows that see no key get a non-zero gradient",
              "a query that sees no key has P = 0: its dq is 0 and it adds nothing to dk, "
              "dv (a row max or sum of a fully masked row used as if it were finite)",
              requires=lambda f: f["empty_rows"]),
    CauseSpec(C.PADDING_SEEN, "padding tokens attend to each other (the packing rule "
              "without its padding guard)",
              "a packed token sees the keys of its own sequence: seg[i] == seg[j] and seg[i] "
              ">= 0; padding (id -1) sees nothing", requires=lambda f: f["packed"]),
    CauseSpec(C.SOFTCAP_AT_CAPPED, "softcap derivative taken at the capped score",
              "dS0 = dS (1 - tanh^2(S0 / c)) at the raw score S0 = scale Q K^T, not "
              "1 - tanh^2(S) at the capped S = c tanh(S0 / c)",
              requires=lambda f: f["softcap"]),
    CauseSpec(C.SCORES_16BIT, "the scores S = scale Q K^T rounded to the 16-bit input dtype",
              "form the scores in fp32 (the product's accumulator and the scale) before "
              "the softmax", requires=lambda f: f["low_precision"]),
    CauseSpec(C.DK_DV_SWAPPED, "dk and dv swapped",
              "the output pointers or the order of the returned gradients"),
    CauseSpec(C.KEY_TAIL, f"the last, partial key block of {BLOCK_K} mishandled",
              "the grid over key blocks (ceil, not floor, of Tk / Bc) and the predication of "
              "the partial block's loads and stores", requires=lambda f: f["partial_key_block"]),
    CauseSpec(C.WINDOW_EDGE, "sliding window edge off by one",
              "the window is inclusive: query i sees keys i + off - left .. i + off + right",
              requires=lambda f: f["windowed"]),
    CauseSpec(C.SCALED, "a gradient off by a constant factor",
              "every constant factor: the softmax scale, 1 / (1 - p), a 1/H of the group"),
) + generic_causes(
    remainder=lambda f: f["partial_key_block"] or f["partial_query_block"],
    tile_offset=lambda f: f["multi_key_block"] or f["multi_query_block"],
    tile_position=lambda f: f["multi_key_block"] or f["multi_query_block"],
    stride=lambda f: True, first_index=lambda f: True, last_index=lambda f: True,
    one_index=lambda f: True, precision=lambda f: f["low_precision"])

# Order: the exact term fits first, then the checked hypotheses, then the positions (the
# rows that see no key, the period search); the generic rules name their causes only when
# none of these holds.
OWN_RULES = (
    Rule(C.DK_DV_SWAPPED, lambda e: e.explains("dk", "swap", 1.0)
         and e.explains("dv", "swap", 1.0)),
    Rule(C.GQA_GROUP_SUM, _any("gqa_first_head", ("dk", "dv"))),
    Rule(C.GQA_INTERLEAVED, _any("gqa_interleaved")),
    Rule(C.SOFTCAP_AT_CAPPED, _any("softcap_at_capped", ("dq", "dk"))),
    Rule(C.PADDING_SEEN, _any("padding_sees_padding")),
    Rule(C.SCORES_16BIT, _any("scores_16bit")),
    Rule(C.DS_SCALE_TWICE, _any("scale_twice", ("dq", "dk"))),
    Rule(C.DS_SCALE_MISSING, _any("scale_missing", ("dq", "dk"))),
    Rule(C.D_MISSING, _any("d_missing", ("dq", "dk"))),
    Rule(C.D_AXIS, _any("d_axis", ("dq", "dk"))),
    Rule(C.CAUSAL_CORNER, _any("other_corner")),
    Rule(C.WINDOW_EDGE, _any("window_edge")),
    Rule(C.EMPTY_ROWS_NAN, lambda e: "dq" in e.nonfinite
         and e.at("dq", "empty_rows") is not None),
    Rule(C.KEY_TAIL, _key_tail),
    Rule(C.SCALED, _scaled),
)


# ---------------------------------------------------------------- checked hypotheses

def _golden_terms(p: Mapping, t: Mapping, attrs: Mapping) -> dict:
    B, H, Tq, _ = t["q"].shape
    if B * H * Tq * t["k"].shape[2] > MAX_TERM_SCORES:
        return {}
    return golden.terms(t["q"], t["k"], t["v"], t["dout"], attrs["scale"], attrs["causal"],
                        t.get("seq_idx"), align=attrs["align"],
                        window=(attrs["window_left"], attrs["window_right"]),
                        softcap=attrs["softcap"], attn_mask=t.get("attn_mask"),
                        dropout_mask=t.get("dropout_mask"), dropout=attrs["dropout"])


CHECKED = Hypotheses(
    op="attention",
    terms={"dp": "of dP (scale (P * dP) K in dq, its transpose times Q in dk)",
           "d": "of D (-scale (P * D) K in dq, its transpose times Q in dk)",
           "softcap": "of the softcap derivative (the -tanh^2 share of dS)",
           "dv": "Pd^T dO (dv itself)"},
    golden_terms=_golden_terms)
CAUSES += CHECKED.causes
# a region rule: only where no story explains the error (a gradient on rows that see no
# key is what padding seeing padding gives too, and that story names it better)
EMPTY_ROWS_GRAD = Rule(C.EMPTY_ROWS_GRAD, lambda e: e.finite("dq")
                       and e.at("dq", "empty_rows") is not None)
RULES = ordered(OWN_RULES, CHECKED.rules,
                (EMPTY_ROWS_GRAD, precision_rule("low_precision")) + GENERIC_RULES)

SPEC = DiagnosisSpec(causes=CAUSES, rules=RULES, features=FEATURES,
                     case_features=case_features, regions=regions, terms=terms,
                     axes=AXES, periods=PERIODS, shapes=shapes, hypotheses=CHECKED)
