"""The op nodes of the blocks: for LayerNorm, the causal conv1d and attention, the forward in
eager PyTorch and the backward's inputs in the op's contract (ops/<op>.py's docstring), so
that the run's chosen implementation (or the golden, in the float64 shadow) computes it.

The forward computes in the tensors' dtype with fp32 statistics and scores, as PyTorch's
kernels do; in float64 (the shadow) everything stays float64. The backward never recomputes
what the forward saved except where the contract asks for it (attention's implementations
recompute the softmax from q, k, v themselves).
"""

from __future__ import annotations

import math
import torch
import torch.nn.functional as F

from bwd_suite.suite import registry
from bwd_suite.suite.opspec import CaseInputs
from bwd_suite.suite.step.node import NodeOp

_NAMES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}


def _acc(t: torch.Tensor) -> torch.dtype:
    """The accumulation dtype of t's computation: fp32, or float64 in the shadow."""
    return torch.promote_types(t.dtype, torch.float32)


def op_params(op: str, like: torch.Tensor, **values) -> dict:
    """The op's case parameters for one call (what `supports` and `empty_outputs` read):
    its defaults, the call's sizes, and the dtype of `like` (left at the default in float64,
    where only the golden runs)."""
    p = dict(registry.ops()[op].params.defaults(), **values)
    if like.dtype in _NAMES:
        p["dtype"] = _NAMES[like.dtype]
    return p


def _dense(g: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """g laid out in memory as `like` (the contract's upstream gradient 'like x')."""
    return g if g.stride() == like.stride() else torch.empty_like(like).copy_(g)


# ---------------------------------------------------------------- LayerNorm

def _ln_forward(x, gamma, beta, *, eps):
    rows = x.reshape(-1, x.shape[-1])
    xa = rows.to(_acc(x))
    mean = xa.mean(-1)
    rstd = torch.rsqrt((xa - mean[:, None]).square().mean(-1) + eps)
    y = ((xa - mean[:, None]) * rstd[:, None] * gamma.to(xa.dtype) + beta.to(xa.dtype))
    return (y.to(x.dtype).view_as(x),), {"x": rows, "gamma": gamma, "mean": mean,
                                          "rstd": rstd, "shape": tuple(x.shape)}


def _ln_contract(saved, grads, attrs):
    x = saved["x"]
    p = op_params("layer_norm", x, rows=x.shape[0], hidden=x.shape[1], eps=attrs["eps"],
                  weight_dtype="match" if saved["gamma"].dtype == x.dtype else "float32")
    dy = grads[0].reshape(x.shape).contiguous()
    return p, CaseInputs({"x": x, "dy": dy, "gamma": saved["gamma"], "mean": saved["mean"],
                          "rstd": saved["rstd"]}, {})


def _ln_grads(out, saved, attrs):
    return out["dx"].view(saved["shape"]), out["dgamma"], out["dbeta"]


def _ln_native(x, gamma, beta, *, eps):
    return (F.layer_norm(x, x.shape[-1:], gamma.to(x.dtype), beta.to(x.dtype), eps),)


LAYER_NORM = NodeOp("layer_norm", _ln_forward, _ln_contract, _ln_grads, _ln_native)


# ---------------------------------------------------------------- causal conv1d

def conv_forward_eager(x, weight, bias, init, activation):
    """Dao's causal conv1d in x's dtype: x (B, D, L), init (B, D, K-1) or zeros."""
    B, D, L = x.shape
    K = weight.shape[1]
    head = init if init is not None else x.new_zeros(B, D, K - 1)
    xc = torch.cat([head, x], dim=-1)
    pre = F.conv1d(xc, weight.to(x.dtype).unsqueeze(1), bias.to(x.dtype), groups=D)
    return F.silu(pre) if activation == "silu" else pre


def _conv_forward(x, weight, bias, init, *, activation):
    out = conv_forward_eager(x, weight, bias, init, activation)
    return (out,), {"x": x, "weight": weight, "bias": bias, "init": init}


def _conv_contract(saved, grads, attrs):
    x, w, init = saved["x"], saved["weight"], saved["init"]
    B, D, L = x.shape
    p = op_params("causal_conv1d", x, batch=B, dim=D, seqlen=L, width=w.shape[1],
                  weight_dtype="match" if w.dtype == x.dtype else "float32",
                  layout="channel_last" if x.stride(1) == 1 else "channel_first",
                  bias=True, activation=attrs["activation"] or "none",
                  initial_states=init is not None, final_states=False)
    return p, CaseInputs({"x": x, "weight": w, "bias": saved["bias"],
                          "dout": _dense(grads[0], x), "seq_idx": None,
                          "initial_states": init, "dfinal_states": None},
                         {"activation": attrs["activation"]})


def _conv_grads(out, saved, attrs):
    return out["dx"], out["dweight"], out["dbias"], out.get("dinitial_states")


def _conv_native(x, weight, bias, init, *, activation):
    return (conv_forward_eager(x, weight, bias, init, activation),)


CAUSAL_CONV1D = NodeOp("causal_conv1d", _conv_forward, _conv_contract, _conv_grads,
                       _conv_native)


def channel_last(t: torch.Tensor) -> torch.Tensor:
    """(B, D, L) stored with D fastest, as Dao's kernels want x and the states."""
    return t.transpose(1, 2).contiguous().transpose(1, 2)


def conv_chunks(x, weight, bias, plan_apply, chunks: tuple, activation="silu"):
    """The conv over x (B, D, L) channel-last in chunks of `chunks` (the last the rest),
    each chunk's initial states the previous chunk's last K-1 inputs (through autograd, so
    their gradient reaches the previous chunk's x): the chunked-state run of Dao's API."""
    K = weight.shape[1]
    L = x.shape[-1]
    edges = [0]
    for c in chunks:
        edges.append(min(L, edges[-1] + c))
    edges.append(L)
    outs, init = [], None
    for s, e in zip(edges[:-1], edges[1:]):
        if e <= s:
            continue
        part = x[..., s:e]
        outs.append(plan_apply(CAUSAL_CONV1D, part, weight, bias, init, activation=activation))
        head = init if init is not None else x.new_zeros(x.shape[0], x.shape[1], K - 1)
        init = channel_last(torch.cat([head, part], dim=-1)[..., -(K - 1):])
    return torch.cat(outs, dim=-1)


# ---------------------------------------------------------------- attention

def _attn_forward(q, k, v, *, scale):
    """Causal attention over (B, H, T, d): scores and softmax in fp32 (float64 in the
    shadow), P rounded to the dtype for P V, as a fused kernel does; lse saved in fp32."""
    acc = _acc(q)
    T = q.shape[2]
    s = (q.to(acc) @ k.to(acc).transpose(-1, -2)) * scale
    causal = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
    s = s.masked_fill(~causal, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.exp(s - lse[..., None])
    o = (p.to(q.dtype) @ v).to(q.dtype)
    return (o,), {"q": q, "k": k, "v": v, "o": o, "lse": lse.to(torch.float32)
                  if q.dtype != torch.float64 else lse}


def _attn_contract(saved, grads, attrs):
    q, k = saved["q"], saved["k"]
    B, H, T, d = q.shape
    p = op_params("attention", q, batch=B, heads=H, kv_heads=k.shape[1], seq_q=T, seq_k=T,
                  head_dim=d, causal=True, softmax_scale=attrs["scale"],
                  layout="bshd" if q.stride(1) == d else "bhsd")
    a = {"causal": True, "align": "top_left", "window_left": -1, "window_right": -1,
         "softcap": 0.0, "scale": attrs["scale"], "dropout": 0.0}
    return p, CaseInputs({"q": q, "k": k, "v": saved["v"], "o": saved["o"],
                          "lse": saved["lse"], "dout": _dense(grads[0], saved["o"]),
                          "seq_idx": None, "attn_mask": None, "dropout_mask": None}, a)


def _attn_grads(out, saved, attrs):
    return out["dq"], out["dk"], out["dv"]


def _attn_native(q, k, v, *, scale):
    return (F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale),)


ATTENTION = NodeOp("attention", _attn_forward, _attn_contract, _attn_grads, _attn_native)


def attention_scale(head_dim: int) -> float:
    return 1.0 / math.sqrt(head_dim)


def drop(x: torch.Tensor, p: float, training: bool = True) -> torch.Tensor:
    """Dropout whose keep mask is drawn in fp32 from the global RNG, whatever x's dtype:
    every run of a scenario (the float64 shadow included) draws the same mask, and
    torch.utils.checkpoint restores the RNG state to draw it again when it recomputes."""
    if not p or not training:
        return x
    keep = torch.rand(x.shape, device=x.device, dtype=torch.float32) >= p
    return x * keep.to(x.dtype) / (1.0 - p)
