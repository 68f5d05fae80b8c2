"""FlexAttention (`torch.nn.attention.flex_attention`), compiled, timed on its backward.

Which keys a query sees is a `mask_mod` (causal at either corner, the sliding window,
packed segments, the case's boolean mask), turned into a block mask so that hidden
blocks are skipped; the softcap and the case's additive mask are a `score_mod`. Both are
built from the case's attributes here, not taken from the golden. Two-phase: `prepare`
compiles (once per shape) and runs the forward under autograd; the timed call is the
compiled backward of that graph. CUDA only (its CPU path compiles through a C++
toolchain CI does not have). A dropout mask cannot be given to it: `unsupported`.
"""

from __future__ import annotations

from typing import Mapping, Optional

import torch

from bwd_suite.kernels.attention.sdpa import backward
from bwd_suite.suite.registry import Unsupported, implementation

_COMPILED = {}


def _flex():
    """The compiled flex_attention, made once a process; shapes recompile (dynamic=False:
    each shape its own kernels, as a training run with fixed shapes has them)."""
    if "fn" not in _COMPILED:
        import torch._dynamo
        from torch.nn.attention.flex_attention import flex_attention
        # every case a shape of its own: past the default limit dynamo would fall back to
        # eager flex_attention, which materialises the scores
        torch._dynamo.config.cache_size_limit = 1024
        if hasattr(torch._dynamo.config, "recompile_limit"):
            torch._dynamo.config.recompile_limit = 1024
        _COMPILED["fn"] = torch.compile(flex_attention, dynamic=False)
    return _COMPILED["fn"]


def supports(p: Mapping) -> Optional[str]:
    if p.get("dropout", 0.0):
        return "FlexAttention takes no dropout mask"
    return None


def mods(q, k, seq_idx, attn_mask, attrs):
    """(mask_mod, score_mod) of the case: visibility, and softcap then the additive mask."""
    Tq, Tk = q.shape[2], k.shape[2]
    off = Tk - Tq if attrs.get("align", "top_left") == "bottom_right" else 0
    causal = attrs["causal"]
    left, right = attrs.get("window_left", -1), attrs.get("window_right", -1)
    seg = seq_idx.long() if seq_idx is not None else None
    keep = attn_mask if attn_mask is not None and attn_mask.dtype == torch.bool else None
    bias = attn_mask if attn_mask is not None and attn_mask.dtype != torch.bool else None
    cap = attrs.get("softcap", 0.0)

    def mask_mod(b, h, qi, kj):
        ok = kj >= 0
        if causal:
            ok = ok & (kj <= qi + off)
        if left >= 0:
            ok = ok & (kj >= qi + off - left)
        if right >= 0:
            ok = ok & (kj <= qi + off + right)
        if seg is not None:
            ok = ok & (seg[b, qi] == seg[b, kj]) & (seg[b, qi] >= 0)
        if keep is not None:
            ok = ok & keep[b if keep.shape[0] > 1 else 0, h if keep.shape[1] > 1 else 0, qi, kj]
        if bias is not None:
            ok = ok & (bias[b if bias.shape[0] > 1 else 0, h if bias.shape[1] > 1 else 0, qi, kj]
                       > float("-inf"))
        return ok

    score_mod = None
    if cap or bias is not None:
        def score_mod(s, b, h, qi, kj):
            if cap:
                s = cap * torch.tanh(s / cap)
            if bias is not None:
                s = s + bias[b if bias.shape[0] > 1 else 0, h if bias.shape[1] > 1 else 0, qi,
                             kj].to(s.dtype)
            return s
    return mask_mod, score_mod


def prepare(*, q, k, v, dout, seq_idx=None, attn_mask=None, **attrs):
    from torch.nn.attention.flex_attention import create_block_mask

    B, H, Tq, _ = q.shape
    Tk = k.shape[2]
    mask_mod, score_mod = mods(q, k, seq_idx, attn_mask, attrs)
    per_batch = seq_idx is not None or (attn_mask is not None and attn_mask.shape[0] > 1)
    block_mask = create_block_mask(mask_mod, B if per_batch else None, None, Tq, Tk,
                                   device=q.device)
    leaves = [t.detach().requires_grad_() for t in (q, k, v)]
    try:
        with torch.enable_grad():
            o = _flex()(*leaves, score_mod=score_mod, block_mask=block_mask,
                        scale=attrs["scale"], enable_gqa=q.shape[1] != k.shape[1])
    except Exception as e:  # noqa: BLE001 - a shape it cannot compile for is a refusal
        text = str(e)
        if "NYI" in text or "not supported" in text.lower() or "must be" in text:
            raise Unsupported(f"FlexAttention: {text.splitlines()[0][:300]}") from None
        raise
    return {"o": o, "leaves": leaves, "dout": dout, "block_mask": block_mask}


# measured on an H100 (torch 2.11): fp32 with one key, dS = dP - D cancels to rounding
# noise and dk sums Tq such terms, 1.2-1.5 times its bound (a tolerance edge, as for the
# memory-efficient backend: cases/attention/findings.toml)
ONE_KEY = ("fp32, one key: dS = dP - D cancels to rounding noise, dk 1.2-1.5 times its "
           "bound (a tolerance edge): cases/attention/findings.toml")
# measured on an H100 (torch 2.11), every head dim: with fewer than 128 queries the forward
# lowers to flex decoding, which packs the G = H / Hkv query heads of a key head into its M
# tile (next_power_of_2(Tq * G)); past 128 rows no tile fits the block mask's 128-query
# blocks and the compile fails ("NoValidChoicesError: No choices to select"): 67 of 246 gpu
# cases, all that the rule names and nothing else; pytorch/pytorch#185349 (findings.toml)
SHORT_GQA = ("compile fails: NoValidChoicesError: fewer than 128 queries with more than 128 "
             "query rows a key head (Tq x H/Hkv) leave flex decoding no tile "
             "(pytorch/pytorch#185349): cases/attention/findings.toml")


def short_gqa_decode(p: Mapping) -> Optional[str]:
    """SHORT_GQA where the case has its shape: Tq < 128 and Tq * H / Hkv > 128."""
    tq, group = p["seq_q"], p["heads"] // p["kv_heads"]
    return SHORT_GQA if tq < 128 and tq * group > 128 else None


KNOWN = {"cuda:attention/short-keys/B1-H2-KV1-Tq203-Tk1-d32-fp32-causal$": ONE_KEY,
         "cuda:attention/short-keys/B1-H2-KV1-Tq799-Tk1-d32-fp32-causal$": ONE_KEY}


@implementation("attention", "torch_flex", kind="native", version=torch.__version__,
                devices=("cuda",), deterministic=False, supports=supports, prepare=prepare,
                known_failures=KNOWN, known_failure_when=short_gqa_decode)
def torch_flex(*, saved, **_):
    """FlexAttention compiled: mask_mod and score_mod from the case (backward alone)"""
    return backward(saved)
