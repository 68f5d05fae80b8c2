"""Op contract of the scaled dot-product attention backward (FlashAttention's backward:
seed 004): query and key lengths apart, causal masks aligned to either corner, sliding
windows, logit softcap, explicit boolean and additive masks, dropout with its keep mask
given, packed sequences, grouped-query heads.

Interface (what every implementation is called with, `fn(**inputs, **attrs, out=...)`):

    inputs  q             (B, H, Tq, d)     case dtype, memory order by `layout`
            k, v          (B, Hkv, Tk, d)   case dtype, memory order by `layout`
            o             (B, H, Tq, d)     the saved forward output (float64 forward
                                            rounded to the dtype; 0 on rows that see
                                            nothing), layout of q
            lse           (B, H, Tq)        fp32 log-sum-exp of each query's scores
                                            (after softcap and bias, before dropout);
                                            -inf on a row that sees nothing
            dout          (B, H, Tq, d)     like q
            seq_idx       (B, T) int32 with packing (segment of each token, -1 padding;
                          Tq == Tk == T), else None
            attn_mask     (B, Hm, Tq, Tk) contiguous, Hm = mask_heads (1 or H), with
                          mask = "bool": bool, True where query i sees key j;
                          mask = "additive": the case dtype, the bias where i sees j and
                          -inf elsewhere; None with mask = "none". It holds the WHOLE
                          visibility (causal, alignment, window, packing folded in): an
                          implementation given it needs no other rule
            dropout_mask  (B, H, Tq, Tk) bool contiguous, True where kept, with
                          dropout > 0, else None; kept probabilities are scaled by
                          1 / (1 - dropout) (FlashAttention's convention)
    attrs   causal        bool   query i sees keys j <= i + off only
            align         str    "top_left" (off = 0, PyTorch's is_causal) or
                                 "bottom_right" (off = Tk - Tq, FlashAttention's)
            window_left   int    query i sees keys j >= i + off - window_left (-1: no bound)
            window_right  int    query i sees keys j <= i + off + window_right (-1: no
                                 bound; always -1 with causal, which is right = 0)
            softcap       float  scores s -> softcap * tanh(s / softcap) after the scale
                                 and before the bias (0: off)
            scale         float  the softmax scale
            dropout       float  the drop probability (0: no dropout)
    outputs dq like q, dk and dv like k (each a reduction).

The float64 truth is `golden.attention.backward` (golden/attention.py, which states the
formulas); an implementation may recompute the forward instead of using o and lse.

Input values: q and k N(0, sqrt(logit_scale)) so that the scores q.k / sqrt(d) have
standard deviation logit_scale (large: near one-hot rows), v and dout N(0, 1); o and lse
the float64 forward rounded to the dtype and to fp32. An additive mask's bias is
N(0, mask_scale) rounded to the dtype; a boolean mask hides about one visible pair in 10
on top of the rules above, by a fixed hash of (batch, mask head, i, j) (`hidden`), so
that the count of visible pairs (flops) follows from the parameters alone. The dropout
keep mask is drawn from the case's seed.

Packing: `packed` cuts each sequence into `segments` unequal segments (cut points moved
per batch row), `packed_padded` also pads the end of row b with T // 4 * (b + 1) // B
tokens of id -1; `none` is one sequence a row.
"""

from __future__ import annotations

import functools
import math
from statistics import NormalDist
from typing import Mapping, Optional

import torch

from bwd_suite.golden import attention as golden
from bwd_suite.ops.attention_diagnosis import SPEC as DIAGNOSIS
from bwd_suite.suite import inputs as mk
from bwd_suite.suite.opspec import CaseInputs, OpSpec, OutputSpec, TolClass
from bwd_suite.suite.params import FloatRange, IntRange, Param, ParamSet, token_unless_default
from bwd_suite.suite.registry import register_op

PACKINGS = ("none", "packed", "packed_padded")
ALIGNS = ("top_left", "bottom_right")
MASKS = ("none", "bool", "additive")
LAYOUTS = {"bshd": (0, 2, 1, 3), "bhsd": (0, 1, 2, 3)}  # memory order of (B, H, T, d)
HIDDEN_ONE_IN = 10  # a boolean mask hides about one visible pair in this many


class _AttentionParams(ParamSet):
    """The attention vocabulary; ids show both lengths as one token: T128 when they are
    equal, Tq3-Tk799 when not."""

    def case_id(self, values: dict) -> str:
        cid = super().case_id(values)
        q, k = values["seq_q"], values["seq_k"]
        return cid.replace(f"Tq{q}-Tk{k}", f"T{q}") if q == k else cid


def _window_token(side: str):
    return lambda v: "" if v < 0 else f"w{side}{v}"


PARAMS = _AttentionParams((
    Param("batch", "int", 2, "B, sequences (rows of packed sequences)", minimum=1,
          id_token=lambda v: f"B{v}", domain=IntRange(1, 16, axis=True, caps={"small": 2})),
    Param("heads", "int", 4, "H, query heads", minimum=1, id_token=lambda v: f"H{v}",
          domain=IntRange(1, 64, axis=True, caps={"small": 4})),
    Param("kv_heads", "int", 4, "Hkv, key/value heads (divides H; fewer: grouped-query)",
          minimum=1, id_token=lambda v: f"KV{v}", domain=IntRange(1, 64, caps={"small": 4}, divides="heads")),
    Param("seq_q", "int", 128, "Tq, queries a row", minimum=1,
          id_token=lambda v: f"Tq{v}", domain=IntRange(1, 1 << 14, axis=True)),
    Param("seq_k", "int", 128, "Tk, keys (and values) a row", minimum=1,
          id_token=lambda v: f"Tk{v}", domain=IntRange(1, 1 << 14, axis=True)),
    Param("head_dim", "int", 64, "d, the head dimension", minimum=1,
          id_token=lambda v: f"d{v}", domain=IntRange(1, 256, axis=True)),
    Param("dtype", "str", "bfloat16", "dtype of q, k, v, o, dout and the gradients",
          choices=("float32", "float16", "bfloat16"), id_token=lambda v: mk.DTYPE_SHORT[v]),
    Param("layout", "str", "bshd", "memory order: bshd (B, T, H, d) or bhsd (B, H, T, d)",
          choices=tuple(LAYOUTS), id_token=lambda v: "" if v == "bshd" else v),
    Param("causal", "bool", True, "query i sees keys j <= i + off only (off: align)",
          id_token=lambda v: "causal" if v else "full"),
    Param("align", "str", "top_left", "corner of the causal diagonal (and the window's "
          "centre) when Tq != Tk: top_left (off 0, PyTorch) or bottom_right (off Tk - Tq, "
          "FlashAttention)", choices=ALIGNS,
          id_token=lambda v: "" if v == "top_left" else "br"),
    Param("window_left", "int", -1, "sliding window: keys j >= i + off - window_left "
          "(-1: unbounded)", minimum=-1, id_token=_window_token("l"),
          domain=IntRange(-1, 1024, caps={"small": 64})),
    Param("window_right", "int", -1, "sliding window: keys j <= i + off + window_right "
          "(-1: unbounded; causal is 0)", minimum=-1, id_token=_window_token("r"),
          domain=IntRange(-1, 1024, caps={"small": 64})),
    Param("softcap", "float", 0.0, "scores s -> softcap tanh(s / softcap) (0: off)",
          minimum=0.0, id_token=token_unless_default("cap", 0.0),
          domain=FloatRange(0.0, 100.0, special=(0.0, 15.0, 50.0))),
    Param("mask", "str", "none", "explicit mask input: none, bool (about 1 visible pair "
          "in 10 hidden) or additive (a N(0, mask_scale) bias, -inf where not seen)",
          choices=MASKS, id_token=lambda v: {"none": "", "bool": "bmask",
                                             "additive": "amask"}[v]),
    Param("mask_heads", "int", 1, "heads of the explicit mask: 1 (broadcast) or H",
          minimum=1, id_token=token_unless_default("mh", 1),
          domain=IntRange(1, 64, caps={"small": 4})),
    Param("mask_scale", "float", 1.0, "standard deviation of an additive mask's bias",
          minimum=0.0, id_token=token_unless_default("ms", 1.0),
          domain=FloatRange(0.0, 30.0, special=(1.0, 0.0, 10.0, 30.0))),
    Param("dropout", "float", 0.0, "drop probability (the keep mask is an input)",
          minimum=0.0, id_token=token_unless_default("drop", 0.0),
          domain=FloatRange(0.0, 0.9, special=(0.0, 0.17, 0.5))),
    Param("packing", "str", "none", "sequences packed in a row (seq_idx), with padding "
          "(needs seq_q == seq_k)", choices=PACKINGS,
          id_token=lambda v: {"none": "", "packed": "pack", "packed_padded": "packpad"}[v]),
    Param("segments", "int", 3, "sequences per row with packing", minimum=1,
          id_token=token_unless_default("s", 3), domain=IntRange(1, 8)),
    Param("softmax_scale", "float", 0.0, "scale of the scores (0: 1 / sqrt(d))", minimum=0.0,
          id_token=token_unless_default("sc", 0.0),
          domain=FloatRange(0.0, 1.0, special=(0.0, 1.0))),
    Param("logit_scale", "float", 1.0, "standard deviation of the scores (large: near "
          "one-hot rows)", minimum=0.0, id_token=token_unless_default("ls", 1.0),
          domain=FloatRange(0.0, 60.0, special=(1.0, 0.0, 10.0, 30.0))),
), fuzz_bounds=lambda p, device: fuzz_bounds(p, device))

# Score spreads the fuzzer stays under (see fuzz_bounds): fp32, and 16-bit dtypes.
MAX_FUZZ_SCORE_STD = {"float32": 30.0, "16-bit": 20.0}


def scale_of(p: Mapping) -> float:
    return p["softmax_scale"] or 1.0 / math.sqrt(p["head_dim"])


# The fuzzer keeps the scores under this many softcaps (see fuzz_bounds).
MAX_FUZZ_CAPS = 8.0


def raw_score_std(p: Mapping) -> float:
    """Standard deviation of scale q.k: logit_scale at the default scale."""
    return p["logit_scale"] * scale_of(p) * math.sqrt(p["head_dim"])


def score_std(p: Mapping) -> float:
    """Standard deviation of the scores the softmax sees: logit_scale at the default
    scale, with an additive mask's bias beside it, at most the softcap."""
    s = raw_score_std(p)
    if p["mask"] == "additive":
        s = math.hypot(s, p["mask_scale"])
    return min(s, p["softcap"]) if p["softcap"] > 0 else s


def fuzz_bounds(p: Mapping, device: str):
    """Valid cases the fuzzer does not draw, with the parameter to blame: rows so near
    one-hot that dq and dk (a cancellation dP - D, far smaller than dP) sink below what a
    correct kernel resolves. fp32 above a score spread of 30: PyTorch's CPU flash kernel
    (online softmax) missed the bound on dv by 1.2-1.9x at 60 and 100 while passing at 30.
    16-bit from 20: kernels take D from the saved o, rounded to 16 bits, and put P and dS
    through 16-bit products; the same kernel missed dq by up to 9x at 30 (fp16 and bf16,
    T = 2 to 33; CPU; measured before alternate_golden, which may allow more now). The
    yardstick's direct softmax in fp32 is no measure of them there.
    Also scores spread over more than MAX_FUZZ_CAPS softcaps: tanh saturates, its
    derivative 1 - tanh² vanishes (dq 1e-18 at a cap of 0.0034 on scores of 0.12) and
    fp32 rounds it to 0 (the fuzzer's torch_ref: dq 0, error 1 of max|golden|).
    Case files may still hold such cases."""
    if p["softcap"] > 0 and raw_score_std(p) > MAX_FUZZ_CAPS * p["softcap"]:
        return "softcap", (f"scores of standard deviation {raw_score_std(p):.3g} over "
                           f"{MAX_FUZZ_CAPS:g} softcaps of {p['softcap']:g}: tanh saturates "
                           "and the gradient vanishes below fp32's resolution")
    key = "float32" if p["dtype"] == "float32" else "16-bit"
    spread, limit = score_std(p), MAX_FUZZ_SCORE_STD[key]
    too_wide = spread > limit if key == "float32" else spread >= limit  # 16-bit: below it
    if too_wide:
        blame = "logit_scale" if p["logit_scale"] > 1 else \
            "mask_scale" if p["mask"] == "additive" and p["mask_scale"] > 1 else \
            "softmax_scale" if p["softmax_scale"] else "head_dim"
        return blame, (f"scores of standard deviation {spread:.3g} "
                       f"(at most {limit:g} in {key}): near one-hot rows "
                       "whose dq, dk a correct kernel does not resolve")
    return None



def check_case(p: Mapping):
    """The combinations no input can hold, or whose keys would do nothing."""
    H, Tq, Tk = p["heads"], p["seq_q"], p["seq_k"]
    if H % p["kv_heads"]:
        return "kv_heads", f"{p['kv_heads']} key/value heads do not divide {H} heads"
    for side in ("window_left", "window_right"):
        if p[side] > Tk:
            return side, f"a window of {p[side]} keys is larger than the {Tk} keys (seq_k)"
    if p["causal"] and p["window_right"] >= 0:
        return "window_right", "is set by causal = true (causal is window_right = 0)"
    if p["mask"] == "none":
        found = PARAMS.no_effect(p, "mask_heads", 'with mask = "none"') or \
            PARAMS.no_effect(p, "mask_scale", 'with mask = "none"')
        if found:
            return found
    elif p["mask_heads"] not in (1, H):
        return "mask_heads", (f"a mask of shape (B, {p['mask_heads']}, Tq, Tk) does not fit "
                              f"{H} heads: mask_heads is 1 or heads")
    if p["mask"] == "bool" and p["mask_scale"] != PARAMS.by_name["mask_scale"].default:
        return "mask_scale", 'has no effect with mask = "bool"'
    if p["dropout"] >= 1:
        return "dropout", f"a drop probability of {p['dropout']} keeps nothing (below 1)"
    if p["packing"] == "none":
        return PARAMS.no_effect(p, "segments", 'with packing = "none"')
    if Tq != Tk:
        return "packing", f"packed rows need seq_q == seq_k, got {Tq} and {Tk}"
    if p["segments"] > Tq:
        return "segments", f"{p['segments']} segments do not fit in seq_q {Tq}"
    return None


def window(p: Mapping) -> tuple:
    return p["window_left"], p["window_right"]


def segment_ids(p: Mapping) -> torch.Tensor:
    """(B, T) int32: the segment of each token, cut points moved per row; -1 padding."""
    B, T, n = p["batch"], p["seq_q"], p["segments"]
    seg = torch.empty((B, T), dtype=torch.int32)
    for b in range(B):
        jitter = max(1, T // (4 * n))
        cuts = sorted({min(T - 1, max(1, T * j // n + (b + 3 * j) % jitter))
                       for j in range(1, n)}) if T > 1 else []
        ids = torch.zeros(T, dtype=torch.int32)
        for c in cuts:
            ids[c:] += 1
        if p["packing"] == "packed_padded":
            pad = T // 4 * (b + 1) // B
            if pad:
                ids[T - pad:] = -1
        seg[b] = ids
    return seg


_M32 = 0xFFFFFFFF


def hidden(b: int, h: int, rows: tuple, cols: tuple, device=None) -> torch.Tensor:
    """(r1 - r0, c1 - c0) bool: the pairs a boolean mask hides on top of the rules, about
    one in HIDDEN_ONE_IN, from a fixed integer hash of (batch, mask head, i, j): any block
    of it is made alone, and the same for every case of those sizes."""
    i = torch.arange(*rows, device=device, dtype=torch.int64)[:, None]
    j = torch.arange(*cols, device=device, dtype=torch.int64)[None, :]
    x = (i * 73856093 ^ (b * 4099 + h) * 83492791) ^ j * 19349663
    x &= _M32
    for _ in range(2):  # a 32-bit integer mix (each product stays below 2^59)
        x ^= x >> 16
        x *= 0x45D9F3B
        x &= _M32
    x ^= x >> 16
    return x < (1 << 32) // HIDDEN_ONE_IN  # x is about uniform over 32 bits


def explicit_mask(p: Mapping, seq_idx, gen: torch.Generator, device) -> torch.Tensor:
    """attn_mask (B, Hm, Tq, Tk): the whole visibility, bool or an additive bias."""
    B, Hm, Tq, Tk = p["batch"], p["mask_heads"], p["seq_q"], p["seq_k"]
    seen = golden.visible(seq_idx, Tq, Tk, p["causal"], device, align=p["align"],
                          window=window(p)).expand(B, Hm, Tq, Tk)
    if p["mask"] == "bool":
        shown = torch.stack([torch.stack([~hidden(b, h, (0, Tq), (0, Tk), device)
                                          for h in range(Hm)]) for b in range(B)])
        return (seen & shown).contiguous()
    bias = mk.randn((B, Hm, Tq, Tk), torch.float32, gen, device, scale=p["mask_scale"])
    return bias.masked_fill(~seen, float("-inf")).to(mk.DTYPES[p["dtype"]])


def keep_threshold(p: float) -> float:
    """t with P(Z >= t) = 1 - p for Z ~ N(0, 1): `draw >= t` keeps with probability 1-p."""
    return NormalDist().inv_cdf(p)


def make_inputs(p: Mapping, seed: int, device: torch.device) -> CaseInputs:
    gen = mk.generator(seed)
    B, H, Hkv, d = p["batch"], p["heads"], p["kv_heads"], p["head_dim"]
    Tq, Tk = p["seq_q"], p["seq_k"]
    dt = mk.DTYPES[p["dtype"]]
    order = LAYOUTS[p["layout"]]
    sigma = math.sqrt(p["logit_scale"])
    q = mk.randn((B, H, Tq, d), dt, gen, device, scale=sigma, order=order)
    k = mk.randn((B, Hkv, Tk, d), dt, gen, device, scale=sigma, order=order)
    v = mk.randn((B, Hkv, Tk, d), dt, gen, device, order=order)
    dout = mk.randn((B, H, Tq, d), dt, gen, device, order=order)
    seq_idx = segment_ids(p).to(device) if p["packing"] != "none" else None
    attn_mask = explicit_mask(p, seq_idx, gen, device) if p["mask"] != "none" else None
    dropout_mask = None
    if p["dropout"] > 0:
        draw = mk.randn((B, H, Tq, Tk), torch.float32, gen, device)
        dropout_mask = draw >= keep_threshold(p["dropout"])
        del draw
    attrs = {"causal": p["causal"], "align": p["align"], "window_left": p["window_left"],
             "window_right": p["window_right"], "softcap": float(p["softcap"]),
             "scale": scale_of(p), "dropout": float(p["dropout"])}
    o64, lse64 = golden.forward(q, k, v, attrs["scale"], p["causal"], seq_idx,
                                align=p["align"], window=window(p), softcap=attrs["softcap"],
                                attn_mask=attn_mask, dropout_mask=dropout_mask,
                                dropout=attrs["dropout"])
    o = mk.empty_like_layout(q)
    o.copy_(o64)
    del o64
    lse = lse64.to(torch.float32)
    return CaseInputs(
        tensors={"q": q, "k": k, "v": v, "o": o, "lse": lse, "dout": dout,
                 "seq_idx": seq_idx, "attn_mask": attn_mask, "dropout_mask": dropout_mask},
        attrs=attrs,
    )


# ---------------------------------------------------------------- outputs

def outputs(p: Mapping):
    # each gradient sums over T (keys for dq, queries for dk and dv; and over the query
    # heads of a group for dk and dv)
    return [OutputSpec("dq", TolClass.REDUCTION), OutputSpec("dk", TolClass.REDUCTION),
            OutputSpec("dv", TolClass.REDUCTION)]


def empty_outputs(inputs: CaseInputs, p: Mapping) -> dict:
    t = inputs.tensors
    return {"dq": mk.empty_like_layout(t["q"]), "dk": mk.empty_like_layout(t["k"]),
            "dv": mk.empty_like_layout(t["v"])}


def _golden_kw(seq_idx, attn_mask, dropout_mask, align, window_left, window_right, softcap,
               dropout) -> dict:
    return dict(seq_idx=seq_idx, align=align, window=(window_left, window_right),
                softcap=softcap, attn_mask=attn_mask, dropout_mask=dropout_mask,
                dropout=dropout)


def run_golden(q, k, v, o, lse, dout, seq_idx, attn_mask, dropout_mask, causal, align,
               window_left, window_right, softcap, scale, dropout):
    return golden.backward(q, k, v, dout, scale, causal, **_golden_kw(
        seq_idx, attn_mask, dropout_mask, align, window_left, window_right, softcap, dropout))


def run_golden_from_o(q, k, v, o, lse, dout, seq_idx, attn_mask, dropout_mask, causal, align,
                      window_left, window_right, softcap, scale, dropout):
    """The gradient with D from the saved o, as FlashAttention-style kernels take it: the
    truth is ambiguous by o's rounding (near one-hot rows and tiny T make dq, dk small
    beside it), and the bound widens by the distance (OpSpec.alternate_golden)."""
    return golden.backward(q, k, v, dout, scale, causal, o=o, **_golden_kw(
        seq_idx, attn_mask, dropout_mask, align, window_left, window_right, softcap, dropout))


# ---------------------------------------------------------------- roofline

def _segment_bounds(seg: torch.Tensor) -> tuple:
    """(first, last) int64 index of each token's segment in one row of seq_idx (its
    segments are contiguous runs)."""
    T = seg.numel()
    pos = torch.arange(T, dtype=torch.int64)
    change = torch.ones(T, dtype=torch.bool)
    change[1:] = seg[1:] != seg[:-1]
    first = torch.where(change, pos, 0).cummax(0).values
    end = torch.ones(T, dtype=torch.bool)
    end[:-1] = change[1:]
    last = torch.where(end, pos, T).flip(0).cummin(0).values.flip(0)
    return first, last


def row_ranges(p: Mapping) -> list:
    """Per batch row, (lo, hi) int64 (Tq): query i sees the keys lo..hi (inclusive; none
    when lo > hi) by alignment, causality, window and packing. One entry for all rows
    without packing."""
    Tq, Tk = p["seq_q"], p["seq_k"]
    lo, hi = golden.bounds(Tq, Tk, p["causal"], p["align"], window(p), (0, Tq), "cpu")
    if p["packing"] == "none":
        return [(lo, hi)]
    out = []
    for seg in segment_ids(p):
        first, last = _segment_bounds(seg)
        pad = seg < 0
        out.append((torch.maximum(lo, first).masked_fill(pad, 1),
                    torch.minimum(hi, last).masked_fill(pad, 0)))
    return out


def _hidden_visible(p: Mapping, lo, hi, b: int, h: int) -> int:
    """Pairs of batch row b and mask head h inside lo..hi that the boolean mask hides,
    counted in blocks of rows, each over the keys its rows' ranges span."""
    Tq, Tk = p["seq_q"], p["seq_k"]
    rows = golden.block_rows(Tk)
    n = 0
    for r0 in range(0, Tq, rows):
        r1 = min(Tq, r0 + rows)
        c0, c1 = int(lo[r0:r1].min()), int(hi[r0:r1].max()) + 1
        if c0 >= c1:
            continue
        j = torch.arange(c0, c1)
        inside = (j >= lo[r0:r1, None]) & (j <= hi[r0:r1, None])
        n += int((inside & hidden(b, h, (r0, r1), (c0, c1))).sum())
    return n


# the parameters the visible pairs depend on
_VISIBILITY = ("batch", "heads", "seq_q", "seq_k", "causal", "align", "window_left",
               "window_right", "packing", "segments", "mask", "mask_heads")


def visible_pairs(p: Mapping) -> int:
    """(query, key) pairs the masks let through, summed over the batch and the query
    heads: from each query's key range in closed form, less the pairs a boolean mask
    hides (counted in blocks, about 70 ns a pair of the rules' ranges on a CPU core:
    remembered, as flops and bytes both ask)."""
    return _visible_pairs(tuple(p[k] for k in _VISIBILITY))


@functools.lru_cache(maxsize=256)
def _visible_pairs(key: tuple) -> int:
    p = dict(zip(_VISIBILITY, key))
    B, H = p["batch"], p["heads"]
    ranges = row_ranges(p)
    per_row = [int((hi - lo + 1).clamp_min(0).sum()) for lo, hi in ranges]
    total = H * (B * per_row[0] if len(ranges) == 1 else sum(per_row))
    if p["mask"] == "bool":
        Hm = p["mask_heads"]
        for b in range(B):
            lo, hi = ranges[min(b, len(ranges) - 1)]
            for h in range(Hm):
                total -= (H // Hm) * _hidden_visible(p, lo, hi, b, h)
    return total


def compulsory_bytes(p: Mapping) -> int:
    """q, o, dout read and dq written (B H Tq d each), k, v read and dk, dv written (B Hkv
    Tk d each), lse read (fp32), seq_idx read (int32) with packing, the explicit mask
    read whole (B Hm Tq Tk, bool or the dtype), and the dropout keep mask's bytes of the
    visible pairs (those of hidden pairs need no reading)."""
    es = torch.finfo(mk.DTYPES[p["dtype"]]).bits // 8
    B, Tq, Tk, d = p["batch"], p["seq_q"], p["seq_k"], p["head_dim"]
    per_q, per_kv = B * p["heads"] * Tq * d, B * p["kv_heads"] * Tk * d
    n = es * (4 * per_q + 4 * per_kv) + 4 * B * p["heads"] * Tq
    if p["packing"] != "none":
        n += 4 * B * Tq
    if p["mask"] != "none":
        n += (1 if p["mask"] == "bool" else es) * B * p["mask_heads"] * Tq * Tk
    if p["dropout"] > 0:
        n += visible_pairs(p)
    return n


def flops(p: Mapping) -> int:
    """Five matrix products over the visible pairs (the scores recomputed, dV, dP, dQ,
    dK): 10 d flops a pair and head, FlashAttention's count (2.5 times the forward's)."""
    return 10 * p["head_dim"] * visible_pairs(p)


def memory_bounds(p: Mapping) -> dict:
    """Analytic temporary memory of the backward, in bytes (seed 002 section 5.1).

    `materialised`: an implementation that materialises the scores, at least
    3BLH + max(BL²N, 3BLH) elements, in seed 002's letters B the batch, L the length, H
    the hidden size (heads x head_dim, so BLH is a q-sized tensor), N the heads (BL²N
    one score matrix of every head); each element of the case dtype's size (the seed's
    worked example counts 16-bit elements, 2 bytes). With Tq != Tk, L² is Tq Tk and BLH
    is q-sized (B Tq H d).
    `fused`: a fused kernel's O(BLH): dq (B H Tq d) and dk, dv (B Hkv Tk d) in the dtype,
    D and lse (B H Tq) in fp32."""
    es = torch.finfo(mk.DTYPES[p["dtype"]]).bits // 8
    B, N, Hkv, d = p["batch"], p["heads"], p["kv_heads"], p["head_dim"]
    Tq, Tk = p["seq_q"], p["seq_k"]
    blh = B * Tq * N * d
    scores = B * N * Tq * Tk
    return {"materialised": es * (3 * blh + max(scores, 3 * blh)),
            "fused": es * (blh + 2 * B * Hkv * Tk * d) + 2 * 4 * B * N * Tq}


def golden_workspace(p: Mapping) -> int:
    """The golden's float64 temporaries for one block of query rows (golden.block_rows):
    the scores, the softcap's tanh, P, dP, dS and their intermediate copies (about twelve
    at once), and the block's boolean visibility."""
    n = min(p["seq_q"], golden.block_rows(p["seq_k"])) * p["seq_k"]
    return 12 * 8 * n + 2 * n


def batch_variant(inputs: CaseInputs, p: Mapping):
    """The same sequences with the batch in reverse order (every input with a batch axis,
    the mask where it has one of its own), and the map of the outputs back: a kernel's
    per-sequence gradients should not depend on where in the batch a sequence sits."""
    B = p["batch"]
    if B < 2:
        return None
    order = torch.arange(B - 1, -1, -1)
    mask = inputs.tensors.get("attn_mask")
    names = ["q", "k", "v", "o", "lse", "dout", "seq_idx", "dropout_mask"] + \
        (["attn_mask"] if mask is not None and mask.shape[0] == B else [])
    tensors = mk.batch_reordered(inputs.tensors, names, order)
    return CaseInputs(tensors, inputs.attrs), lambda out: mk.batch_restored(out, order)


SPEC = register_op(OpSpec(
    name="attention",
    doc="scaled dot-product attention backward (causal either corner, windows, softcap, "
        "masks, dropout, packed, grouped-query): dq, dk, dv",
    params=PARAMS,
    check_case=check_case,
    make_inputs=make_inputs,
    golden=run_golden,
    alternate_golden=run_golden_from_o,
    golden_workspace=golden_workspace,
    outputs=outputs,
    empty_outputs=empty_outputs,
    bytes=compulsory_bytes,
    flops=flops,
    memory_bounds=memory_bounds,
    batch_variant=batch_variant,
    diagnosis=DIAGNOSIS,
))
