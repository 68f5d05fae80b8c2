"""Op contract of the causal depthwise conv1d backward (Dao's causal-conv1d semantics).

Inputs: x (B, D, L) channel-first or channel-last, weight (D, K), optional bias (D,),
dout like x, optional seq_idx (B, L) int32 (ids < 0 are padding), optional
initial_states (B, D, K-1) (channel-last storage, as Dao's kernel wants), optional
dfinal_states (B, D, K-1) in any layout. Attribute: activation None or "silu".
Outputs: dx like x, dweight (D, K), dbias (D,) with bias, dinitial_states with initial
states. The float64 truth is `golden.causal_conv1d.backward`.

Chunked state: with `chunks = [c1, c2, ...]` the sequence is cut into chunks of these
lengths (the last takes the rest); each chunk is one call, its initial states are the
previous chunk's final states and its dfinal_states the next chunk's dinitial_states.
The stitched gradients are compared with the golden of the whole sequence.

Input values: x = x_scale * N(0, 1), weight N(0, 1/K), bias N(0, 1), dout N(0, 1) (or
dout_mean + dout_corr * out' + N(0, 1), out' the forward output standardized along L,
plus dout_peak at the last step: `_upstream`), states N(0, 1), each rounded to its dtype.
"""

from __future__ import annotations

import math
from typing import Mapping

import torch

from bwd_suite.golden import causal_conv1d as golden
from bwd_suite.ops.causal_conv1d_diagnosis import SPEC as DIAGNOSIS
from bwd_suite.suite import inputs as mk
from bwd_suite.suite.opspec import CaseInputs, OpSpec, OutputSpec, TolClass, call_once
from bwd_suite.suite.params import FloatRange, IntList, IntRange, Param, ParamSet, upstream_params
from bwd_suite.suite.registry import register_op

SEQ_IDX_PATTERNS = ("none", "random", "tile_edges", "mid_tile", "short_segments",
                    "repeated_ids", "padding_tail", "padding_head", "padding_mid")

PARAMS = ParamSet((
    Param("batch", "int", 2, "B", minimum=1, id_token=lambda v: f"B{v}",
          domain=IntRange(1, 1 << 10, axis=True, caps={"small": 8})),
    Param("dim", "int", 64, "D, channels", minimum=1, id_token=lambda v: f"D{v}",
          domain=IntRange(1, 1 << 16, axis=True)),
    Param("seqlen", "int", 128, "L, time steps", minimum=1, id_token=lambda v: f"L{v}",
          domain=IntRange(1, 1 << 20, axis=True)),
    Param("width", "int", 4, "K, filter width", minimum=2, id_token=lambda v: f"K{v}",
          domain=IntRange(2, 16, caps={"small": 8})),
    Param("dtype", "str", "bfloat16", "dtype of x, dout, states and dx",
          choices=("float32", "float16", "bfloat16"), id_token=lambda v: mk.DTYPE_SHORT[v]),
    Param("weight_dtype", "str", "float32", "float32, or match: the dtype of x",
          choices=("float32", "match"), id_token=lambda v: "" if v == "float32" else "wmatch"),
    Param("layout", "str", "channel_last", "memory layout of x",
          choices=("channel_first", "channel_last"),
          id_token=lambda v: {"channel_first": "cf", "channel_last": "cl"}[v]),
    Param("x_sliced", "bool", False, "x is a slice of a wider buffer (non-dense strides)",
          id_token=lambda v: "xslice" if v else ""),
    Param("x_scale", "float", 1.0, "standard deviation of x (large values saturate SiLU)",
          minimum=0.0, id_token=lambda v: "" if v == 1.0 else f"xs{float(v)!r}",
          domain=FloatRange(1e-3, 1000.0, special=(1.0, 0.01, 10.0, 100.0, 1000.0))),
    Param("bias", "bool", True, "with bias", id_token=lambda v: "" if v else "nobias"),
    Param("activation", "str", "silu", "none or silu", choices=("none", "silu"),
          id_token=lambda v: "silu" if v == "silu" else ""),
    Param("seq_idx", "str", "none", "packed-sequence pattern (ids < 0 are padding)",
          choices=SEQ_IDX_PATTERNS, id_token=lambda v: "" if v == "none" else f"pack-{v}"),
    Param("tile", "int", 64, "tile length that seq_idx patterns place boundaries around",
          minimum=1, id_token=lambda v: "" if v == 64 else f"T{v}",
          domain=IntRange(1, 1024, caps={"small": 256})),
    Param("initial_states", "bool", False, "with initial states",
          id_token=lambda v: "init" if v else ""),
    Param("final_states", "bool", False, "final states returned: a dfinal_states gradient",
          id_token=lambda v: "final" if v else ""),
    Param("dfinal_layout", "str", "channel_last", "memory layout of dfinal_states",
          choices=("channel_last", "contiguous", "expanded"),
          id_token=lambda v: "" if v == "channel_last" else f"dF-{v}"),
    Param("dout_layout", "str", "like_x", "memory layout of dout",
          choices=("like_x", "other", "sliced", "expanded"),
          id_token=lambda v: "" if v == "like_x" else f"dout-{v}"),
    Param("chunks", "int_list", [], "chunk lengths for a chunked-state run (last = rest)",
          minimum=1, id_token=lambda v: f"chunks{'.'.join(map(str, v))}" if v else "",
          domain=IntList(IntRange(1, 1 << 20), max_len=3, sum_below="seqlen")),
    *upstream_params("dout", "a mean(dout) (dbias) that does not shrink like 1/sqrt(L)",
                     "the forward output standardized along L per channel",
                     "the last time step of every channel"),
), fuzz_bounds=lambda p, device: fuzz_bounds(p, device))

# x_scale times the 16-bit dtype's eps up to which the same-dtype yardstick's SiLU stays
# inside the tolerance, and the largest |dweight| it may sum in fp16 (see fuzz_bounds)
MAX_SILU_SCALE_ULPS = 1 / 32
MAX_FP16_SUM = 2.0 ** 13
MAX_PACKED_16BIT_SUM = 512  # batch x seqlen of a packed 16-bit case with a shifted dout


def fuzz_bounds(p: Mapping, device: str):
    """Valid cases the fuzzer does not draw, with the parameter to blame: where the
    yardstick torch_ref, which computes every step in the 16-bit dtype of x (on every
    device), is wrong by itself.
    - SiLU with x_scale large for the dtype: the pre-activation's 16-bit rounding,
      x_scale * eps, moves silu' by up to half of it near 0 (measured in bf16: dx 0.25
      of max|dx| off at x_scale 983, dbias 0.16 off at 12.7 on 3578 packed steps), so
      x_scale * eps stays within 1/32 (bf16: x_scale 4, fp16: 32);
    - fp16 sums that overflow: the dweight sums reach about x_scale (sqrt(B L)
      (1 + |dout_mean|) + B L |dout_corr| + |dout_peak|), dbias B L (|dout_mean| +
      |dout_corr|) + sqrt(B L) + B |dout_peak| (seen on the H200: inf at B L = 2.3M with
      dout_mean 1, at 466k with dout_corr 1);
    - packed rows (seq_idx) with a shifted dout past B L = 512: its masked path sums
      dweight and dbias over B L in 16 bits (measured: 0.08 of max|dweight| off at
      B L = 1996 in bf16, 0.02 of dbias at 2470 in fp16)."""
    dt = mk.DTYPES[p["dtype"]]
    if dt == torch.float32:
        return None
    if p["activation"] == "silu" and p["x_scale"] * torch.finfo(dt).eps > MAX_SILU_SCALE_ULPS:
        return "x_scale", (f"SiLU with x_scale {p['x_scale']:g} in {p['dtype']}: the "
                           f"16-bit yardstick's silu' is off by itself")
    shifted = next((k for k in ("dout_peak", "dout_mean", "dout_corr") if p[k]), None)
    if shifted and p["seq_idx"] != "none" and p["batch"] * p["seqlen"] > MAX_PACKED_16BIT_SUM:
        return shifted, ("a shifted dout on long packed 16-bit rows: the yardstick's masked "
                         "path sums dweight and dbias in 16 bits")
    if dt == torch.float16:
        # a dout following the output follows x too: its sums grow like B L, not sqrt
        n = p["batch"] * p["seqlen"]
        corr = n * abs(p["dout_corr"])
        size = (math.sqrt(n) * (1 + abs(p["dout_mean"])) + corr + abs(p["dout_peak"])) \
            * p["x_scale"]
        if p["bias"]:  # dbias: sum(dout) over B L
            size = max(size, n * abs(p["dout_mean"]) + corr + math.sqrt(n)
                       + p["batch"] * abs(p["dout_peak"]))
        if size > MAX_FP16_SUM:
            return shifted or "x_scale", "the fp16 yardstick's dweight or dbias sums may overflow"
    return None


def check_case(p: Mapping):
    if p["chunks"]:
        if sum(p["chunks"]) >= p["seqlen"]:
            return "chunks", (f"chunk lengths sum to {sum(p['chunks'])}, which leaves no "
                              f"last chunk of seqlen {p['seqlen']}")
        if p["seq_idx"] != "none":
            return "chunks", "chunked state with packed sequences (seq_idx) is not defined"
    if p["dout_layout"] == "expanded" and (p["dout_corr"] or p["dout_peak"]):
        return ("dout_layout", "an expanded dout is constant along L: it cannot follow "
                               "the output or peak at the end")
    if p["dfinal_layout"] != "channel_last" and not p["final_states"]:
        return "dfinal_layout", "has no effect without final_states = true"
    return None


# ---------------------------------------------------------------- input factory

_ORDER = {"channel_first": (0, 1, 2), "channel_last": (0, 2, 1)}


def _seq_idx_row(pattern: str, L: int, K: int, T: int, gen: torch.Generator) -> list:
    """One row of sequence ids (non-decreasing unless the pattern says otherwise)."""
    def randint(lo, hi):  # inclusive
        return int(torch.randint(lo, hi + 1, (1,), generator=gen))

    if pattern == "random":
        cuts = sorted({randint(1, max(1, L - 1)) for _ in range(randint(0, 3))} - {L})
    elif pattern == "tile_edges":
        cuts = [c for n in range(1, L // T + 1) for c in (n * T,) if 0 < c < L]
    elif pattern == "mid_tile":
        cuts = [n * T + T // 2 + randint(-2, 2) for n in range(L // T + 1)]
    elif pattern == "short_segments":  # segments shorter than K-1 first, then the rest
        cuts, pos = [], 0
        while pos < L // 2 and len(cuts) < 8:
            pos += randint(1, max(1, K - 2))
            cuts.append(pos)
    else:
        cuts = []
    cuts = sorted({c for c in cuts if 0 < c < L})
    bounds = [0, *cuts, L]
    row = []
    for i in range(len(bounds) - 1):
        row += [i] * (bounds[i + 1] - bounds[i])

    if pattern == "repeated_ids":  # runs of id 0 separated by short runs of another id
        row, i, sep = [], 0, 1
        while len(row) < L:
            row += [0] * randint(1, 2 * K)
            row += [sep] * randint(1, K)
            sep += 1
        row = row[:L]
    if pattern.startswith("padding"):
        npad = max(1, L // 4)
        if pattern == "padding_tail":
            row = [0] * (L - npad) + [-1] * npad
        elif pattern == "padding_head":
            row = [-1] * npad + [0] * (L - npad)
        else:  # two sequences with padding between them
            a = (L - npad) // 2
            row = [0] * a + [-1] * npad + [1] * (L - npad - a)
    return row


def _upstream(noise, x, weight, bias, seq_idx, init, p):
    """dout = a + b * out' + noise, out' the float64 forward output of these inputs
    standardized along L per (batch, channel), plus a peak at the last step: rounded once
    to the dtype, in noise's memory layout. With N(0, 1) noise alone mean(dout) and the
    dweight sums shrink like 1/sqrt(L), so a kernel that drops a term passes at large L in
    16-bit; these keep them of order one."""
    a, b, peak = p["dout_mean"], p["dout_corr"], p["dout_peak"]
    if noise.stride(2) == 0:  # expanded: only a shift keeps it constant along L
        base = noise[..., :1]
        return (base.double() + a).to(noise.dtype).expand_as(noise)
    out = None
    if b:
        act = None if p["activation"] == "none" else p["activation"]
        out, _ = golden.forward(x.double(), weight.double(),
                             None if bias is None else bias.double(), seq_idx=seq_idx,
                             initial_states=None if init is None else init.double(),
                             activation=act)
    g = mk.upstream(noise, out, a, b, peak)
    noise.copy_(g)  # noise is this case's own tensor: keep its strides
    return noise


def _layout(t_shape, dtype, gen, device, layout, **kw):
    return mk.randn(t_shape, dtype, gen, device, order=_ORDER[layout], **kw)


def make_inputs(p: Mapping, seed: int, device: torch.device) -> CaseInputs:
    gen = mk.generator(seed)
    B, D, L, K = p["batch"], p["dim"], p["seqlen"], p["width"]
    dt = mk.DTYPES[p["dtype"]]
    wdt = dt if p["weight_dtype"] == "match" else torch.float32
    x = _layout((B, D, L), dt, gen, device, p["layout"], scale=p["x_scale"],
                pad_last=16 if p["x_sliced"] else 0)
    weight = mk.randn((D, K), wdt, gen, device, scale=K ** -0.5)
    bias = mk.randn((D,), wdt, gen, device) if p["bias"] else None

    other = "channel_first" if p["layout"] == "channel_last" else "channel_last"
    dl = p["dout_layout"]
    if dl == "expanded":  # the gradient of a sum over time: stride 0 along L
        dout = mk.randn((B, D, 1), dt, gen, device).expand(B, D, L)
    else:
        dout = _layout((B, D, L), dt, gen, device, other if dl == "other" else p["layout"],
                       pad_last=8 if dl == "sliced" else 0)

    seq_idx = None
    if p["seq_idx"] != "none":
        rows = [_seq_idx_row(p["seq_idx"], L, K, p["tile"], gen) for _ in range(B)]
        seq_idx = torch.tensor(rows, dtype=torch.int32, device=device)

    init = None
    if p["initial_states"]:
        init = mk.randn((B, D, K - 1), dt, gen, device, order=(0, 2, 1))
    dfinal = None
    if p["final_states"]:
        fl = p["dfinal_layout"]
        if fl == "expanded":
            dfinal = mk.randn((B, D, 1), dt, gen, device).expand(B, D, K - 1)
        else:
            dfinal = mk.randn((B, D, K - 1), dt, gen, device,
                              order=(0, 2, 1) if fl == "channel_last" else None)
    if p["dout_mean"] or p["dout_corr"] or p["dout_peak"]:
        dout = _upstream(dout, x, weight, bias, seq_idx, init, p)
    return CaseInputs(
        tensors={"x": x, "weight": weight, "bias": bias, "dout": dout, "seq_idx": seq_idx,
                 "initial_states": init, "dfinal_states": dfinal},
        attrs={"activation": None if p["activation"] == "none" else p["activation"]},
    )


# ---------------------------------------------------------------- outputs

def outputs(p: Mapping):
    outs = [OutputSpec("dx", TolClass.ELEMENTWISE), OutputSpec("dweight", TolClass.REDUCTION)]
    if p["bias"]:
        outs.append(OutputSpec("dbias", TolClass.REDUCTION))
    if p["initial_states"]:
        outs.append(OutputSpec("dinitial_states", TolClass.STATE))
    return outs


def empty_outputs(inputs: CaseInputs, p: Mapping) -> dict:
    t = inputs.tensors
    out = {"dx": mk.empty_like_layout(t["x"]),
           "dweight": torch.empty_like(t["weight"], memory_format=torch.contiguous_format)}
    if t["bias"] is not None:
        out["dbias"] = torch.empty_like(t["bias"], memory_format=torch.contiguous_format)
    if t["initial_states"] is not None:
        out["dinitial_states"] = mk.empty_like_layout(t["initial_states"])
    return out


def run_golden(x, weight, bias, dout, seq_idx, initial_states, dfinal_states, activation):
    return golden.backward(x, weight, dout, bias=bias, seq_idx=seq_idx,
                           initial_states=initial_states, dfinal_states=dfinal_states,
                           activation=activation)


# ---------------------------------------------------------------- roofline

def _sizes(p):
    es = torch.finfo(mk.DTYPES[p["dtype"]]).bits // 8
    ws = es if p["weight_dtype"] == "match" else 4
    return p["batch"], p["dim"], p["seqlen"], p["width"], es, ws


def compulsory_bytes(p: Mapping) -> int:
    """x and dout read, dx written (3 B D L); weight/bias read and their grads written;
    seq_idx, initial states, dfinal_states read and dinitial_states written."""
    B, D, L, K, es, ws = _sizes(p)
    n = 3 * B * D * L * es + 2 * D * K * ws
    n += 2 * D * ws if p["bias"] else 0
    n += B * L * 4 if p["seq_idx"] != "none" else 0
    n += 2 * B * D * (K - 1) * es if p["initial_states"] else 0
    n += B * D * (K - 1) * es if p["final_states"] else 0
    return n


def flops(p: Mapping) -> int:
    """Per output element: dx and dweight taps (2K each), dbias (1), and with SiLU the
    pre-activation recompute (2K) and its derivative (about 8)."""
    B, D, L, K, _, _ = _sizes(p)
    per = 4 * K + 1 + (2 * K + 8 if p["activation"] == "silu" else 0)
    return B * D * L * per


# ---------------------------------------------------------------- chunked state

def _final_states(prev, x_chunk, K):
    """Last K-1 time steps of concat(prev, x_chunk), stored channel-last like Dao's."""
    tail = torch.cat([prev, x_chunk], dim=-1)[..., -(K - 1):]
    return tail.transpose(1, 2).contiguous().transpose(1, 2)


def invoke(spec, fn, inputs: CaseInputs, p: Mapping, allocate) -> dict:
    if not p["chunks"]:
        return call_once(spec, fn, inputs, p, allocate)
    t = inputs.tensors
    x, dout = t["x"], t["dout"]
    B, D, L = x.shape
    K = t["weight"].shape[1]
    edges = [0]
    for c in p["chunks"]:
        edges.append(edges[-1] + c)
    edges.append(L)
    spans = list(zip(edges[:-1], edges[1:]))

    states = [t["initial_states"]]  # forward pass of the states, chunk by chunk
    for s, e in spans[:-1]:
        prev = states[-1] if states[-1] is not None else x.new_zeros(B, D, K - 1)
        states.append(_final_states(prev, x[..., s:e], K))

    dfinal, parts = t["dfinal_states"], []
    for i in reversed(range(len(spans))):
        s, e = spans[i]
        sub = CaseInputs(dict(t, x=x[..., s:e], dout=dout[..., s:e],
                              initial_states=states[i], dfinal_states=dfinal), inputs.attrs)
        sub_p = dict(p, seqlen=e - s, chunks=[], initial_states=states[i] is not None,
                     final_states=dfinal is not None)
        out = call_once(spec, fn, sub, sub_p, allocate)
        dfinal = out.get("dinitial_states")
        parts.append(out)
    parts.reverse()

    stitched = empty_outputs(inputs, p)
    for (s, e), part in zip(spans, parts):
        stitched["dx"][..., s:e].copy_(part["dx"])
    for name in ("dweight", "dbias"):
        if name in stitched:
            total = sum(part[name].float() for part in parts)
            stitched[name].copy_(total)
    if "dinitial_states" in stitched:
        stitched["dinitial_states"].copy_(parts[0]["dinitial_states"])
    return stitched


SPEC = register_op(OpSpec(
    name="causal_conv1d",
    doc="causal depthwise conv1d backward: dx, dweight, dbias, dinitial_states",
    params=PARAMS,
    check_case=check_case,
    make_inputs=make_inputs,
    golden=run_golden,
    outputs=outputs,
    empty_outputs=empty_outputs,
    bytes=compulsory_bytes,
    flops=flops,
    invoke=invoke,
    diagnosis=DIAGNOSIS,
))
