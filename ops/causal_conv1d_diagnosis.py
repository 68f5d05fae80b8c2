"""What the causal conv1d op's axes and features mean to the failure diagnosis.

Seed 000's symptom table, extended, as data: the regions of each output a kernel engineer
looks at (the last and first K-1 steps of each 64- and 128-step tile, of each 8-step
vector, of the sequence and of each chunk; positions near packed boundaries; padding; one
batch index; the partial vector of 8 channels and each 64-channel tile), the reference
terms a wrong output is compared with (the right-halo gradients' contribution, the state
path, the batches after the first, the taps across packed boundaries), the case features
that matter, the causes, and the rules from evidence to cause. `suite/diagnosis/` does
the measuring and scoring.

Terms are computed from the float64 golden, which is linear in dout: the contribution of a
set S of output positions to every gradient is golden.backward with dout zeroed outside S.
"""

from __future__ import annotations

import math
from typing import Mapping

import torch
import torch.nn.functional as F

from bwd_suite.golden import causal_conv1d as golden
from bwd_suite.ops.causal_conv1d_causes import Cause
from bwd_suite.suite.diagnosis import (COEF_TOL, EXACT_RESIDUAL, GENERIC_RULES, PARTIAL_RESIDUAL,
                                       CauseSpec, DiagnosisSpec, Evidence, Feature, Hypotheses,
                                       Region, Rule, Term, generic_causes, ordered,
                                       precision_rule)

TILES = (64, 128)  # Dao's channel-last backward: 64-step tiles for L <= 128, else 128
VECTOR = 8  # elements per vector load (16 bytes of bf16): time steps or channels
CHANNEL_TILE = 64  # channels per block of the channel-last kernel
MAX_INDEXED = 8  # one region per batch index / channel tile up to this many


# ---------------------------------------------------------------- case features

def _spans(p: Mapping) -> list:
    """(start, end) of each call: one for the whole sequence, or one per chunk."""
    edges = [0]
    for c in p["chunks"]:
        edges.append(edges[-1] + c)
    edges.append(p["seqlen"])
    return list(zip(edges[:-1], edges[1:]))


def case_features(p: Mapping) -> dict:
    H = p["width"] - 1
    calls = [e - s for s, e in _spans(p)]
    return {
        "silu": p["activation"] == "silu",
        "bias": bool(p["bias"]),
        "channel_last": p["layout"] == "channel_last",
        "low_precision": p["dtype"] != "float32",
        "init": bool(p["initial_states"]),
        # a call gets a dfinal_states gradient from final states or from the next chunk
        "dfinal": bool(p["final_states"] or p["chunks"]),
        "chunked": bool(p["chunks"]),
        "seq_idx": p["seq_idx"] != "none",
        "padding": p["seq_idx"].startswith("padding"),
        "short": min(calls) < H,
        "all_state": max(calls) <= H,  # every step of every call is in the last K-1
        "multi_batch": p["batch"] > 1,
        "multi_tile": max(calls) > TILES[0],
        "partial_vector": p["dim"] % VECTOR != 0,
        "batch": p["batch"],
        "tiles": sum(math.ceil(c / TILES[0]) for c in calls),
        "seqlen": p["seqlen"],
    }


FEATURES = (
    Feature("silu", "with SiLU"),
    Feature("bias", "with bias"),
    Feature("channel_last", "channel-last"),
    Feature("low_precision", "with 16-bit activations"),
    Feature("init", "with initial states"),
    Feature("dfinal", "with a dfinal_states gradient (final states or chunks)"),
    Feature("chunked", "in chunked-state runs", implies=("dfinal",)),
    Feature("seq_idx", "with packed sequences (seq_idx)"),
    Feature("padding", "with padding ids", implies=("seq_idx",)),
    Feature("short", "when L < K-1 (a call shorter than the state)"),
    Feature("multi_batch", "with batch > 1"),
    Feature("multi_tile", f"with more than one {TILES[0]}-step tile"),
    Feature("partial_vector", f"when dim is not a multiple of {VECTOR}"),
    Feature("batch", "batch", numeric=True),
    Feature("tiles", f"the number of {TILES[0]}-step tiles", numeric=True),
)


# ---------------------------------------------------------------- regions

def _steps(n: int) -> str:
    return f"{n} step" + ("s" if n != 1 else "")


def _time_regions(p: Mapping, seq_idx, H: int, device) -> list:
    """Regions along time as (B or 1, L) masks."""
    L = p["seqlen"]
    t = torch.arange(L, device=device)
    spans = _spans(p)
    local = torch.empty_like(t)  # position within its call, where the kernel's tiles start
    for s, e in spans:
        local[s:e] = t[s:e] - s
    longest = max(e - s for s, e in spans)
    regs = [("seq_head", f"in the first {_steps(H)} of the sequence", t < H),
            ("seq_tail", f"in the last {_steps(H)} of the sequence", t >= L - H)]
    if len(spans) > 1:
        tail = torch.zeros(L, dtype=torch.bool, device=device)
        head = torch.zeros_like(tail)
        for s, e in spans:
            tail |= (t >= e - H) & (t < e)
            head |= (t >= s) & (t < s + H) & (s > 0)
        regs += [("chunk_tail", f"in the last {_steps(H)} before each chunk edge", tail),
                 ("chunk_head", f"in the first {_steps(H)} after each chunk edge", head)]
    for T in TILES:
        if longest > T:
            regs += [(f"tile_tail_{T}", f"in the last {_steps(H)} of each {T}-step tile",
                      local % T >= T - H),
                     (f"tile_head_{T}",
                      f"in the first {_steps(H)} of each {T}-step tile after the first",
                      (local % T < H) & (local >= T))]
    if H < VECTOR:
        regs.append((f"vec_tail_{VECTOR}", f"in the last {_steps(H)} of each {VECTOR}-step "
                     f"vector", local % VECTOR >= VECTOR - H))
    masks = [(n, d, m.unsqueeze(0)) for n, d, m in regs]
    if seq_idx is not None:
        masks.append(("boundary", f"within {_steps(H)} of a packed-sequence boundary",
                      _near_boundaries(seq_idx, p["initial_states"], H)))
        pad = seq_idx < 0
        if bool(pad.any()):
            masks.append(("padding", "at padding positions (seq_idx < 0)", pad))
    return masks


def _near_boundaries(seq_idx, has_init: bool, H: int):
    """(B, L): positions within H steps of an id change, the state slots included (their
    id is seq_idx[:, 0] with initial states, else -1, as in the golden)."""
    B, L = seq_idx.shape
    slots = seq_idx[:, :1].expand(B, H) if has_init else seq_idx.new_full((B, H), -1)
    ids = torch.cat([slots, seq_idx], dim=1)  # (B, L+H), extended positions
    change = (ids[:, 1:] != ids[:, :-1]).to(torch.float32)  # change[j]: between j and j+1
    # extended position e is near change j when j in [e-H, e+H-1]
    near = F.pad(change, (H, H)).unfold(1, 2 * H, 1)[:, :L + H].amax(-1) > 0
    return near[:, H:]


def _channel_regions(D: int, device) -> list:
    """Regions along channels as (D,) masks."""
    c = torch.arange(D, device=device)
    regs = []
    full = D // VECTOR * VECTOR  # channels in full vectors
    if D % VECTOR and D > VECTOR:
        regs.append((f"channel_tail_{VECTOR}",
                     f"in the last, partial vector of {VECTOR} channels (>= {full})",
                     c >= full))
    n_tiles = math.ceil(D / CHANNEL_TILE)
    if 1 < n_tiles <= MAX_INDEXED:
        for i in range(n_tiles):
            regs.append((f"channel_tile_{i}", f"in channel tile {i} ({CHANNEL_TILE} "
                         f"channels from {i * CHANNEL_TILE})", c // CHANNEL_TILE == i))
    return regs


def regions(p: Mapping, t: Mapping, output: str, shape: tuple) -> list:
    x = t["x"]
    B, D, L = x.shape
    H = p["width"] - 1
    dev = x.device
    chan = _channel_regions(D, dev)
    batch = [(f"batch_{b}", f"in batch {b}", torch.arange(B, device=dev) == b)
             for b in range(min(B, MAX_INDEXED))] if B > 1 else []
    if output == "dx":  # (B, D, L)
        found = [Region(n, d, m.unsqueeze(1)) for n, d, m in
                 _time_regions(p, t["seq_idx"], H, dev)]
        found += [Region(n, d, m.view(1, D, 1)) for n, d, m in chan]
        found += [Region(n, d, m.view(B, 1, 1)) for n, d, m in batch]
        return found
    if output == "dinitial_states":  # (B, D, H): slot i is extended position i
        first = _spans(p)[0][1]
        found = []
        if first < H:
            found.append(Region("slots_surviving",
                                f"in the state slots i >= L ({first}) that survive into "
                                f"final_states", (torch.arange(H, device=dev) >= first)
                                .view(1, 1, H)))
        found += [Region(n, d, m.view(1, D, 1)) for n, d, m in chan]
        found += [Region(n, d, m.view(B, 1, 1)) for n, d, m in batch]
        return found
    if output == "dweight":  # (D, K)
        return [Region(n, d, m.view(D, 1)) for n, d, m in chan]
    if output == "dbias":
        return [Region(n, d, m) for n, d, m in chan]
    return []


# ---------------------------------------------------------------- terms

def _backward(t: Mapping, attrs: Mapping, dout, dfinal=None) -> dict:
    return golden.backward(t["x"], t["weight"], dout, bias=t["bias"], seq_idx=t["seq_idx"],
                           initial_states=t["initial_states"], dfinal_states=dfinal,
                           activation=attrs["activation"])


class _Memo:
    """The terms of the last case seen: every implementation failing a case gets the same
    reference terms (they depend on the inputs only), so a run that tries many
    implementations on one case (the mutant zoo) computes them once. Keyed by the
    identity of the case's float64 inputs, which the runner keeps for the case."""

    def __init__(self):
        self.inputs, self.values = None, {}

    def get(self, t: Mapping, key, make):
        if self.inputs is not t:
            self.inputs, self.values = t, {}
        if key not in self.values:
            self.values[key] = make()
        return self.values[key]


_MEMO = _Memo()


def _cross_boundary_dweight(t: Mapping, attrs: Mapping):
    """Sum over taps the packed mask removes of g' * x: what dweight gains when it
    ignores seq_idx. Built from the golden's own steps so it matches it exactly."""
    x, w, seq_idx, init = t["x"], t["weight"], t["seq_idx"], t["initial_states"]
    K = w.shape[1]
    xc = golden._extended(x, init, K)
    mask = golden._tap_mask(seq_idx, init is not None, K, x)
    pre, windows = golden._preactivation(xc, w, t["bias"], mask, seq_idx)
    g = t["dout"]
    if attrs["activation"] == "silu":
        s = torch.sigmoid(pre)
        g = g * s * (1 + pre * (1 - s))
    g = g.masked_fill((seq_idx < 0).unsqueeze(1), 0.0)
    return (windows * (1 - mask).unsqueeze(1) * g.unsqueeze(-1)).sum((0, 2))


def terms(p: Mapping, t: Mapping, attrs: Mapping, ev: Evidence) -> dict:
    """The reference terms worth testing given where the errors are."""
    x, dout = t["x"], t["dout"]
    B, D, L = x.shape
    H = p["width"] - 1
    spans = _spans(p)
    pos = torch.arange(L, device=x.device)
    found = {o: [] for o in ev.wrong}
    dx_at_state = "dx" in ev.wrong and (ev.touches("dx", "seq_tail")
                                        or ev.touches("dx", "chunk_tail"))

    if ev.f("dfinal") and (dx_at_state or "dinitial_states" in ev.wrong):
        # what reaches each call through its final states: later outputs and dfinal_states
        dfinal = t["dfinal_states"]
        state_dx = torch.zeros_like(x)
        for s, e in spans:
            later = _MEMO.get(t, ("later", e), lambda e=e: _backward(
                t, attrs, dout * (pos >= e), dfinal))
            state_dx[..., s:e] = later["dx"][..., s:e]
            if s == 0 and "dinitial_states" in later and "dinitial_states" in found:
                found["dinitial_states"].append(Term(
                    "state_path", "the state path (dfinal_states and later chunks)",
                    later["dinitial_states"]))
        if dx_at_state:
            found["dx"].append(Term("state_path",
                                    "the state path (dfinal_states and later chunks)",
                                    state_dx))

    local = torch.empty_like(pos)
    for s, e in spans:
        local[s:e] = pos[s:e] - s
    for T in TILES:
        at_tile = "dx" in ev.wrong and ev.touches("dx", f"tile_tail_{T}")
        if max(e - s for s, e in spans) <= T or not (at_tile or "dweight" in ev.wrong):
            continue
        halo = (local >= T) & (local % T < H)  # outputs read as a previous tile's halo
        part = _MEMO.get(t, ("halo", T), lambda: _backward(t, attrs, dout * halo))
        doc = f"the gradients right of each {T}-step tile (its K-1 halo)"
        if at_tile:
            found["dx"].append(Term(f"tile_halo_{T}", doc, part["dx"] * (local % T >= T - H)))
        if "dweight" in found:
            found["dweight"].append(Term(f"tile_halo_{T}", doc, part["dweight"]))

    if B > 1 and ev.wrong & {"dweight", "dbias"}:
        rest = _MEMO.get(t, ("rest",), lambda: _backward(
            t, attrs, dout * (torch.arange(B, device=x.device) > 0).view(B, 1, 1)))
        for o in ("dweight", "dbias"):
            if o in found and o in rest:
                found[o].append(Term("batch_rest", "the contributions of batches > 0",
                                     rest[o]))

    if t["seq_idx"] is not None and "dweight" in found:
        found["dweight"].append(Term("cross_boundary",
                                     "the taps across packed boundaries",
                                     _MEMO.get(t, ("cross",),
                                               lambda: _cross_boundary_dweight(t, attrs))))
    return found


# ---------------------------------------------------------------- causes and rules

def _tile(e: Evidence):
    """T of the tile family holding dx's errors, or None."""
    lo = e.where("dx") if "dx" in e.wrong else None
    return int(lo.region.rsplit("_", 1)[1]) if lo and lo.region.startswith("tile_tail_") \
        else None


def _halo_fits(e: Evidence) -> list:
    """Fits of dx's error to the right-halo term of the tile holding the errors: empty
    when that halo contributes nothing there (a packed boundary at the tile edge masks
    it), and then no halo bug can be the cause."""
    T = _tile(e)
    return e.fit("dx", f"tile_halo_{T}") if T else []


def _halo_missing(e: Evidence) -> bool:
    return any(abs(f.coef + 1) <= COEF_TOL and f.residual <= EXACT_RESIDUAL
               for f in _halo_fits(e))


def _tail(e: Evidence) -> bool:
    """dx wrong where the state enters: the last K-1 steps of the sequence or of each
    chunk (every step when the call is shorter than K-1)."""
    return "dx" in e.wrong and bool(e.at("dx", "seq_tail") or e.at("dx", "chunk_tail"))


def _inner_edges(e: Evidence) -> bool:
    """Chunked, dx wrong only before inner chunk edges: the state handed from one chunk
    to the previous is wrong, the sequence's own end is right."""
    return (e.f("chunked") and "dx" in e.wrong
            and e.at("dx", "chunk_tail", specific=True) is not None
            and not e.touches("dx", "seq_tail"))


def _end_of_sequence(e: Evidence) -> bool:
    """dx wrong in a specific region at the state end that includes the sequence end."""
    return "dx" in e.wrong and bool(e.at("dx", "seq_tail", specific=True)
                                    or e.at("dx", "chunk_tail", specific=True)) \
        and e.touches("dx", "seq_tail")


def _spread(e: Evidence) -> bool:
    """dx wrong all over, and the case has more steps than the state window (when every
    step lies in the last K-1, "all over" cannot be told from a state-path error)."""
    return not e.f("all_state") and e.spread("dx")


C = Cause
CAUSES = (
    CauseSpec(C.RIGHT_HALO, "right halo of upstream gradients missing",
              "each tile must read the K-1 dout (and delta) values right of it; zero them "
              "only past L", requires=lambda f: f["multi_tile"]),
    CauseSpec(C.OUT_OF_RANGE, "gradients past the sequence end not zeroed",
              "out-of-range loads in the last tile's halo must give 0, not a clamped or "
              "stale value"),
    CauseSpec(C.SILU_HALO_RECOMPUTE, "SiLU recompute lacks the input right halo",
              "recomputing pre-activations of the halo outputs needs x up to b+K-1, not "
              "only the forward's left halo", requires=lambda f: f["silu"] and f["multi_tile"]),
    CauseSpec(C.SILU_RECOMPUTE_BIAS, "SiLU pre-activation recompute omits the bias",
              "pre = bias + sum_k w x, with the forward's bias and sequence rules",
              requires=lambda f: f["silu"] and f["bias"]),
    CauseSpec(C.SILU_DERIVATIVE, "SiLU derivative wrong",
              "delta = g * s * (1 + pre * (1 - s)), s = sigmoid(pre)",
              requires=lambda f: f["silu"]),
    CauseSpec(C.HALO_IN_DWEIGHT, "halo counted twice in dweight",
              "a tile owns the dweight/dbias contributions of its own outputs only; the "
              "halo it reads belongs to the next tile", requires=lambda f: f["multi_tile"]),
    CauseSpec(C.BATCH_REDUCTION, "cross-batch reduction of dweight loses contributions",
              "global reduction of the per-block partials: initialisation, atomics or a "
              "racing store", requires=lambda f: f["multi_batch"]),
    CauseSpec(C.DFINAL_PATH, "dfinal_states copy path missing",
              "dx[t] += dF[t-(L-K+1)] for the last K-1 steps, dinit[i] += dF[i-L] for "
              "i >= L", requires=lambda f: f["dfinal"]),
    CauseSpec(C.DFINAL_SCALED, "dfinal_states path scaled (it is a pure copy)",
              "dF enters dx and dinitial_states as is, not times a weight or SiLU's "
              "derivative", requires=lambda f: f["dfinal"]),
    CauseSpec(C.SHORT_SEQ_STATE, "L < K-1 state contributions dropped",
              "when a call is shorter than K-1 every step lies in the final state: "
              "dx[t] += dF[t+K-1-L] and dinit[i] += dF[i-L]",
              requires=lambda f: f["dfinal"] and f["short"]),
    CauseSpec(C.DINIT_DFINAL, "dinitial_states misses the dfinal_states pass-through",
              "with L < K-1 the state slots i >= L survive into final_states: "
              "dinit[i] += dF[i-L]",
              requires=lambda f: f["dfinal"] and f["short"] and (f["init"] or f["chunked"])),
    CauseSpec(C.PACKED_MASK, "packed-sequence mask of the dx gather wrong",
              "forward and backward masks must compare the ids of the same source and "
              "target positions (id[p] == id[p+j] for dx[p] from output p+j)",
              requires=lambda f: f["seq_idx"]),
    CauseSpec(C.DWEIGHT_MASK, "dweight ignores the packed-sequence mask",
              "the dweight product needs the same seq_idx mask as the forward",
              requires=lambda f: f["seq_idx"]),
    CauseSpec(C.PADDING, "padding positions not masked in the backward",
              "zero the upstream gradient where seq_idx < 0 (the forward's output is 0 "
              "there)", requires=lambda f: f["padding"]),
    CauseSpec(C.CHANNEL_TAIL, "partial channel vector mishandled",
              "the last vector of fewer than 8 channels needs per-lane predication",
              requires=lambda f: f["partial_vector"]),
)

# Order: the most specific evidence first (it leads the one-line diagnosis).
RULES = (
    Rule(C.RIGHT_HALO, lambda e: bool(_halo_fits(e))
         and (_halo_missing(e) or not e.f("silu"))),
    Rule(C.SILU_HALO_RECOMPUTE, lambda e: e.f("silu") and bool(_halo_fits(e))
         and not _halo_missing(e)),
    Rule(C.HALO_IN_DWEIGHT, lambda e: e.only("dweight")
         and e.explains("dweight", "tile_halo", 1.0)),
    Rule(C.BATCH_REDUCTION, lambda e: e.only("dweight", "dbias")
         and (e.explains("dweight", "batch_rest", -1.0)
              or e.explains("dbias", "batch_rest", -1.0))),
    Rule(C.DWEIGHT_MASK, lambda e: e.only("dweight")
         and e.explains("dweight", "cross_boundary", 1.0)),
    Rule(C.CHANNEL_TAIL, lambda e: bool(e.wrong)
         and all(e.located(o, "channel_tail") for o in e.wrong)),
    Rule(C.PADDING, lambda e: e.f("padding") and bool(e.wrong & {"dweight", "dbias"})
         and ("dx" not in e.wrong or e.located("dx", "padding"))),
    Rule(C.PACKED_MASK, lambda e: e.f("seq_idx") and "dx" in e.wrong
         and e.at("dx", "boundary", specific=True) is not None),
    Rule(C.DINIT_DFINAL, lambda e: e.f("dfinal") and e.f("short") and (
        (e.only("dinitial_states") and e.explains("dinitial_states", "state_path", -1.0))
        or _inner_edges(e))),
    Rule(C.SHORT_SEQ_STATE, lambda e: e.f("dfinal") and e.f("short") and "dx" in e.wrong
         and (e.loses("dx", "state_path") or _inner_edges(e))),
    Rule(C.DFINAL_PATH, lambda e: e.f("dfinal") and e.explains("dx", "state_path", -1.0)),
    Rule(C.DFINAL_SCALED, lambda e: e.f("dfinal") and _tail(e)
         and e.partly("dx", "state_path")),
    Rule(C.OUT_OF_RANGE, lambda e: _end_of_sequence(e) and not any(
        f.residual <= PARTIAL_RESIDUAL for f in e.fit("dx", "state_path"))),
)
# errors all over, no term of the op's explaining them: after the checked hypotheses
SPREAD_RULES = (
    Rule(C.SILU_RECOMPUTE_BIAS, lambda e: e.f("silu") and e.f("bias") and _spread(e)),
    Rule(C.SILU_DERIVATIVE, lambda e: e.f("silu") and _spread(e)),
)

# ---------------------------------------------------------------- axes, for the period search

AXES = {"dx": ("batch", "channel", "step"), "dweight": ("channel", "tap"),
        "dbias": ("channel",), "dinitial_states": ("batch", "channel", "slot")}
PERIODS = {"step": (*TILES, VECTOR), "channel": (CHANNEL_TILE, VECTOR)}


def shapes(p: Mapping) -> dict:
    B, D, L, K = p["batch"], p["dim"], p["seqlen"], p["width"]
    return {"dx": (B, D, L), "dweight": (D, K), "dbias": (D,),
            "dinitial_states": (B, D, K - 1)}


# The generic causes of the period search (a remainder, every tile but the first, a
# stride, fixed positions of each tile, one index) name a cause only where none of the
# rules above does: the op's own words win where it has them.
CAUSES += generic_causes(precision=lambda f: f["low_precision"])


# ---------------------------------------------------------------- checked hypotheses

# the checked hypotheses cost a few float64 backwards: left out beyond this size
MAX_CHECKED_ELEMENTS = 1 << 22


def _kw(t: Mapping, attrs: Mapping) -> dict:
    return dict(bias=t["bias"], seq_idx=t["seq_idx"], initial_states=t["initial_states"],
                dfinal_states=t["dfinal_states"], activation=attrs["activation"])


def _golden_terms(p: Mapping, t: Mapping, attrs: Mapping) -> dict:
    if t["x"].numel() > MAX_CHECKED_ELEMENTS:
        return {}
    return golden.terms(t["x"], t["weight"], t["dout"], **_kw(t, attrs))


def _x_other_layout(p: Mapping, x):
    """x as a kernel sees it that reads its storage as dense in the other layout
    (channel-last storage as channel-first, or the reverse); None where the storage holds
    more than x's values (a slice of a wider buffer, a chunk of a longer sequence)."""
    if p["x_sliced"] or p["chunks"]:
        return None
    B, D, L = x.shape
    if p["layout"] == "channel_last":  # storage (B, L, D) read as (B, D, L)
        return x.transpose(1, 2).reshape(B, D, L)
    return x.reshape(B, L, D).transpose(1, 2)  # storage (B, D, L) read as (B, L, D)


def _perturbed(p: Mapping, t: Mapping, attrs: Mapping, base: Mapping) -> dict:
    """The gradients with the taps in the other order (convolution against correlation),
    with seq_idx ignored, with the state slots matched to no sequence (the initial states
    unseen: the gradients without them, dinitial_states only the dfinal_states pass-
    through), and with x read in the other layout."""
    if t["x"].numel() > MAX_CHECKED_ELEMENTS:
        return {}
    kw = _kw(t, attrs)
    x, w, dout = t["x"], t["weight"], t["dout"]
    found = {"taps_flipped": golden.backward(x, w.flip(-1), dout, **kw)}
    if t["seq_idx"] is not None:
        found["seq_idx_ignored"] = golden.backward(x, w, dout, **{**kw, "seq_idx": None})
        if t["initial_states"] is not None:
            unseen = golden.backward(x, w, dout, **{**kw, "initial_states": None})
            unseen["dinitial_states"] = golden.backward(
                x, w, torch.zeros_like(dout), **kw)["dinitial_states"]
            found["state_slots_unmatched"] = unseen
    misread = _x_other_layout(p, x)
    if misread is not None:
        found["x_other_layout"] = golden.backward(misread, w, dout, **kw)
    return found


CHECKED = Hypotheses(
    op="causal_conv1d",
    terms={"taps": "of the taps (sum over k of w[k] g' shifted)",
           "state": "of the dfinal_states copy path", "dweight": "dweight itself",
           "dbias": "dbias itself",
           "silu": "of SiLU's derivative (the gradient minus the one with g' = g)"},
    golden_terms=_golden_terms,
    attributes={"taps_flipped": "with the filter taps in the other order",
                "seq_idx_ignored": "with seq_idx ignored (no packed-sequence mask)",
                "state_slots_unmatched": "with the initial-state slots matched to no "
                "sequence (the initial states unseen under seq_idx)",
                "x_other_layout": "with x's storage read as the other layout (its strides "
                "ignored)"},
    perturbed=_perturbed)
CAUSES += CHECKED.causes
# the rules above first (their words win where they have them), then the checked
# hypotheses, then the period search's generic causes
RULES = ordered(RULES, CHECKED.rules,
                SPREAD_RULES + (precision_rule("low_precision"),) + GENERIC_RULES)

SPEC = DiagnosisSpec(causes=CAUSES, rules=RULES, features=FEATURES,
                     case_features=case_features, regions=regions, terms=terms,
                     axes=AXES, periods=PERIODS, shapes=shapes, hypotheses=CHECKED)
