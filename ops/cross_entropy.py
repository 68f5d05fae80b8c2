"""Op contract of cross entropy over the vocabulary, forward and backward in one call, as
fused kernels compute them (issue 27; Liger's cross entropy, PyTorch's F.cross_entropy
semantics). The float64 truth is `golden.cross_entropy`; docs/ops/cross_entropy.md.

Inputs: logits (N, V) in the case dtype, N = batch * seq (B sequences of T tokens,
flattened); targets (N,) int64, the labels with masked positions at ignore_index (as a
data collator leaves them), not yet shifted; grad_loss, the upstream gradient of the loss,
fp32, () for mean and sum, (N,) for none. Attributes: ignore_index, label_smoothing,
reduction (mean, sum, none), z_loss (coefficient of lse^2 per token), softcap (0: off),
shift (score position t against the label of t + 1 within each sequence; the last
position ignored), seq_len (T, for the shift). Outputs: loss (fp32: () or (N,)) and
dlogits (N, V) in the logits dtype.

An implementation without an alignment entry point aligns the targets with
`shift_targets` (ops/cross_entropy_labels.py) first. Gradient accumulation (accumulation
= k > 1) is the op's `invoke`, the trainer's loop: the batch is split along B into k
micro-batches and the implementation called on each; the case's loss is the sum of theirs
and dlogits their rows. With normalize = global_tokens (the fixed Trainer, transformers
#34191) each call runs reduction sum with grad_loss / D, D the non-ignored count over all
micro-batches, and the loss is divided by D; with micro_batch (the 2024 bug's semantics)
each runs its own mean with grad_loss / k, and the loss is divided by k. The golden
computes whichever the case asks for.

A mean over zero tokens is 0 with a zero gradient (the golden's convention, Liger's);
PyTorch gives NaN: torch_ref declares those cases known failures.

Input values: ids uniform in [0, V) (`targets = random`), all 0 (`zero`), all V - 1
(`last`) or all `target_class` (`class`); logits logit_mean + logit_scale * N(0, 1)
rounded to the dtype (logit_scale 0: all equal); grad_loss N(0, 1) pushed away from 0 by
0.5. Masks set labels to ignore_index: `prompt` the first mask_len tokens of every
sequence, `padding_right` / `padding_left` the last / first mask_len * (b + 1) // B
tokens of sequence b (unequal counts, as variable lengths give), `all_ignored_row`
sequence 0, `all_ignored_batch` everything. The EOS position is each sequence's last
unpadded token; eos = false ignores its label.
"""

from __future__ import annotations

import math
from typing import Mapping

import torch

from bwd_suite.golden import cross_entropy as golden
from bwd_suite.ops.cross_entropy_diagnosis import SPEC as DIAGNOSIS
# aligned, empty_mean and shift_targets also as the op's public names: adapters and tests
# call ops.cross_entropy.aligned
from bwd_suite.ops.cross_entropy_labels import (aligned, constant_target, empty_mean,  # noqa: F401
                                                label_mask, shift_targets)
from bwd_suite.suite import inputs as mk
from bwd_suite.suite.opspec import CaseInputs, OpSpec, OutputSpec, TolClass, call_once
from bwd_suite.suite.params import FloatRange, IntRange, Param, ParamSet, token_unless_default
from bwd_suite.suite.registry import register_op
from bwd_suite.suite.tolerances import CEILINGS

MASKS = ("none", "prompt", "padding_right", "padding_left", "all_ignored_row",
         "all_ignored_batch")
MASK_TOKENS = {"none": "", "prompt": "prompt", "padding_right": "padr",
               "padding_left": "padl", "all_ignored_row": "ignrow",
               "all_ignored_batch": "ignall"}
USES_MASK_LEN = ("prompt", "padding_right", "padding_left")
TARGETS = ("random", "zero", "last", "class")
# attributes for the golden and the trainer loop, not handed to implementations
TRAINER_ATTRS = ("accumulation", "normalize")


PARAMS = ParamSet((
    Param("batch", "int", 2, "B, sequences (micro-batches split along it)", minimum=1,
          id_token=lambda v: f"B{v}", domain=IntRange(1, 64, axis=True, caps={"small": 4})),
    Param("seq", "int", 16, "T, tokens per sequence (N = B * T rows of logits)", minimum=1,
          id_token=lambda v: f"T{v}", domain=IntRange(1, 1 << 14, axis=True)),
    Param("vocab", "int", 1000, "V, classes (the softmax dimension)", minimum=1,
          id_token=lambda v: f"V{v}", domain=IntRange(1, 1 << 18, axis=True)),
    Param("dtype", "str", "bfloat16", "dtype of logits and dlogits",
          choices=("float32", "float16", "bfloat16"), id_token=lambda v: mk.DTYPE_SHORT[v]),
    Param("targets", "str", "random", "input ids: uniform, all 0, all V-1, all target_class",
          choices=TARGETS, id_token=lambda v: "" if v == "random" else f"y{v}"),
    Param("target_class", "int", 0, "the id of every token with targets = class",
          id_token=token_unless_default("c", 0), domain=IntRange(0, 0)),
    Param("logit_scale", "float", 1.0, "standard deviation of the logits (0: all equal)",
          minimum=0.0, id_token=token_unless_default("ls", 1.0),
          domain=FloatRange(0.0, 100.0, special=(1.0, 0.0, 10.0, 100.0))),
    Param("logit_mean", "float", 0.0, "added to every logit (stability of the lse)",
          id_token=token_unless_default("lm", 0.0),
          domain=FloatRange(-1000.0, 1000.0, special=(0.0, 1000.0, -1000.0))),
    Param("ignore_index", "int", -100, "the label that is not scored (may be a class)",
          id_token=token_unless_default("ii", -100), domain=IntRange(-100, 2)),
    Param("label_smoothing", "float", 0.0, "eps in (1 - eps) nll + eps mean_j(-log p_j)",
          minimum=0.0, id_token=token_unless_default("eps", 0.0),
          domain=FloatRange(0.0, 1.0, special=(0.0, 0.1, 1.0))),
    Param("z_loss", "float", 0.0, "z: z * lse^2 added per token (PaLM)", minimum=0.0,
          id_token=token_unless_default("z", 0.0),
          domain=FloatRange(0.0, 1.0, special=(0.0, 1e-4, 1.0))),
    Param("softcap", "float", 0.0, "c: logits -> c tanh(logits / c) first (0: off)",
          minimum=0.0, id_token=token_unless_default("cap", 0.0),
          domain=FloatRange(0.0, 100.0, special=(0.0, 30.0, 1.0))),
    Param("shift", "bool", False, "score position t against the label of t + 1",
          id_token=lambda v: "shift" if v else ""),
    Param("eos", "bool", True, "the EOS position (last unpadded token) keeps its label",
          id_token=lambda v: "" if v else "noeos"),
    # reduction then mask: adjacent tokens, so "mean-ignall" names a mean over nothing
    Param("reduction", "str", "mean", "mean over non-ignored tokens, sum, or none (N,)",
          choices=("mean", "sum", "none"), id_token=lambda v: v),
    Param("mask", "str", "none", "which labels are ignore_index", choices=MASKS,
          id_token=lambda v: MASK_TOKENS[v]),
    Param("mask_len", "int", 4, "tokens of the prompt or padding (longest padding)",
          minimum=0, id_token=token_unless_default("m", 4), domain=IntRange(0, 64)),
    Param("accumulation", "int", 1, "k micro-batches along B (must divide batch)",
          minimum=1, id_token=token_unless_default("acc", 1), domain=IntRange(1, 4)),
    Param("normalize", "str", "global_tokens", "with accumulation and mean: divide by the "
          "global non-ignored count, or each micro-batch by its own and the sum by k (the "
          "2024 bug)", choices=("global_tokens", "micro_batch"),
          id_token=lambda v: "" if v == "global_tokens" else "mb"),
), fuzz_bounds=lambda p, device: fuzz_bounds(p, device))


def check_case(p: Mapping):
    B, T, V = p["batch"], p["seq"], p["vocab"]
    if p["targets"] == "class":
        c = p["target_class"]
        if not (0 <= c < V) and c != p["ignore_index"]:
            return "target_class", (f"{c} is outside [0, {V}) and not the ignore_index "
                                    f"{p['ignore_index']}")
    elif p["target_class"] != 0:
        return "target_class", "has no effect without targets = \"class\""
    if p["mask"] in USES_MASK_LEN:
        if p["mask_len"] > T:
            return "mask_len", f"{p['mask_len']} tokens is longer than the sequence (seq {T})"
    elif p["mask_len"] != PARAMS.by_name["mask_len"].default:
        return "mask_len", f"has no effect with mask = {p['mask']!r}"
    if p["mask"] == "all_ignored_row" and B < 2:
        return "mask", "all_ignored_row needs batch >= 2 (with one it is all_ignored_batch)"
    if B % p["accumulation"]:
        return "accumulation", f"{p['accumulation']} micro-batches do not divide batch {B}"
    if p["normalize"] == "micro_batch" and (p["accumulation"] == 1 or p["reduction"] != "mean"):
        return "normalize", "has no effect without accumulation > 1 and reduction = mean"
    if p["label_smoothing"] > 1:
        return "label_smoothing", f"{p['label_smoothing']!r} must be in [0, 1]"
    return None


def fuzz_bounds(p: Mapping, device: str):
    """Valid cases the fuzzer does not draw, with the parameter to blame: a softcap that
    saturates most logits, a zero exact gradient, and 16-bit cases where the same-dtype
    yardstick's lse is too coarse or its loss terms overflow fp16. (A mean over zero
    tokens is drawn: PyTorch's NaN there is its declared `known_failure_when`.)"""
    c, mu, sigma = p["softcap"], abs(p["logit_mean"]), p["logit_scale"]
    if c and (mu - 2 * sigma > 2 * c or sigma > 3 * c):
        # nearly every logit saturates tanh: the derivative 1 - tanh^2 cancels to 0 in
        # every dtype (the whole gradient is then below the rounding of the largest)
        return "softcap", "the softcap saturates almost every logit (1 - tanh^2 cancels)"
    ulp = mu * torch.finfo(mk.DTYPES[p["dtype"]]).eps
    lse = mu + 3 * sigma + math.log(p["vocab"])
    # logits spread less than 0.1, or less than their dtype's spacing at the mean (then many
    # round to one value: bf16 logits of -1000 +- 1 are all -1000), are (nearly) equal
    if p["label_smoothing"] == 1 and (sigma < 0.1 or sigma < ulp) and p["z_loss"] * lse < 0.1:
        # (nearly) equal logits against the uniform target: the exact gradient is 0 or the
        # small z-loss term, below the rounding of p - 1/V in any dtype
        return "label_smoothing", "equal logits and smoothing 1: the exact gradient is about 0"
    big = abs(p["logit_mean"]) + 6 * p["logit_scale"] + math.log(p["vocab"])
    if p["softcap"]:
        big = min(big, p["softcap"] + math.log(p["vocab"]))
    if p["z_loss"] and p["dtype"] != "float32":
        # the yardstick's lse rounded to 16 bits: its z-loss gradient 2 z lse exp(x - lse)
        # is off by exp(half an ulp of lse), a share 2 z lse / (1 + 2 z lse) of dlogits
        half_ulp = big * torch.finfo(mk.DTYPES[p["dtype"]]).eps / 2
        share = 2 * p["z_loss"] * big / (1 + 2 * p["z_loss"] * big)
        if share * math.expm1(half_ulp) > CEILINGS[mk.DTYPES[p["dtype"]]] / 4:
            return ("logit_mean" if p["logit_mean"] else "z_loss",
                    "a 16-bit lse too coarse for the yardstick's z-loss gradient")
    if p["dtype"] == "float16":
        per = big * (2 + p["z_loss"] * big)
        n = p["batch"] * p["seq"] if p["reduction"] == "sum" else 1
        if p["label_smoothing"] and p["reduction"] != "none" and \
                p["batch"] * p["seq"] * p["vocab"] * big > 3e4:
            # PyTorch sums sum_j log p_j over the tokens in fp16, then divides
            return "label_smoothing", "the smoothing sum may overflow fp16 in the yardstick"
        if per * n > 3e4:
            blame = "z_loss" if p["z_loss"] else "reduction" if n > 1 else "logit_scale"
            return blame, "loss terms may overflow fp16 in the yardstick"
    return None


# ---------------------------------------------------------------- input factory

def make_inputs(p: Mapping, seed: int, device: torch.device) -> CaseInputs:
    gen = mk.generator(seed)
    B, T, V = p["batch"], p["seq"], p["vocab"]
    N = B * T
    dt = mk.DTYPES[p["dtype"]]
    const = constant_target(p)
    if const is None:
        ids = torch.randint(0, V, (B, T), generator=gen, dtype=torch.int64)
    else:
        ids = torch.full((B, T), const, dtype=torch.int64)
    labels = torch.where(label_mask(p), ids, torch.full_like(ids, p["ignore_index"]))
    x = mk.randn((N, V), torch.float32, gen, torch.device("cpu"), scale=p["logit_scale"])
    logits = (x + p["logit_mean"]).to(dt).to(device)
    z = torch.randn((N,) if p["reduction"] == "none" else (), generator=gen,
                    dtype=torch.float32)
    grad = torch.where(z >= 0, z + 0.5, z - 0.5).to(device)
    attrs = {k: p[k] for k in ("ignore_index", "label_smoothing", "reduction", "z_loss",
                               "softcap", "shift")}
    attrs["seq_len"] = T
    attrs.update({k: p[k] for k in TRAINER_ATTRS})
    return CaseInputs(tensors={"logits": logits, "targets": labels.reshape(-1).to(device),
                               "grad_loss": grad}, attrs=attrs)


def invoke(spec, fn, inputs: CaseInputs, p: Mapping, allocate) -> dict:
    """One call per micro-batch (the trainer's loop); the loss summed and normalized as
    the case says, dlogits stitched from the micro-batches' rows."""
    attrs = {k: v for k, v in inputs.attrs.items() if k not in TRAINER_ATTRS}
    k = p["accumulation"]
    if k == 1:
        return call_once(spec, fn, CaseInputs(inputs.tensors, attrs), p, allocate)
    t = inputs.tensors
    logits, targets, grad = t["logits"], t["targets"], t["grad_loss"]
    rows = logits.shape[0] // k
    red = p["reduction"]
    if red == "mean" and p["normalize"] == "global_tokens":
        scored_all = aligned(targets, attrs["shift"], attrs["seq_len"], attrs["ignore_index"])
        denom = max(int((scored_all != attrs["ignore_index"]).sum()), 1)
        call_attrs, call_grad, loss_div = dict(attrs, reduction="sum"), grad / denom, denom
    elif red == "mean":
        call_attrs, call_grad, loss_div = attrs, grad / k, k
    else:
        call_attrs, call_grad, loss_div = attrs, grad, 1
    stitched = empty_outputs(inputs, p)
    total = torch.zeros((), dtype=torch.float32, device=logits.device)
    for g in range(k):
        s = slice(g * rows, (g + 1) * rows)
        sub = CaseInputs({"logits": logits[s], "targets": targets[s],
                          "grad_loss": call_grad[s] if red == "none" else call_grad},
                         call_attrs)
        out = call_once(spec, fn, sub, dict(p, batch=p["batch"] // k, accumulation=1),
                        allocate)
        stitched["dlogits"][s].copy_(out["dlogits"])
        if red == "none":
            stitched["loss"][s].copy_(out["loss"])
        else:
            total = total + out["loss"]
    if red != "none":
        stitched["loss"].copy_(total / loss_div)
    return stitched


# ---------------------------------------------------------------- outputs

def outputs(p: Mapping):
    # the loss sums over V (and tokens); each dlogits element is a short formula of its
    # row's lse, rounded once
    return [OutputSpec("loss", TolClass.REDUCTION), OutputSpec("dlogits", TolClass.ELEMENTWISE)]


def empty_outputs(inputs: CaseInputs, p: Mapping) -> dict:
    logits = inputs.tensors["logits"]
    shape = (logits.shape[0],) if p["reduction"] == "none" else ()
    return {"loss": torch.empty(shape, dtype=torch.float32, device=logits.device),
            "dlogits": torch.empty_like(logits, memory_format=torch.contiguous_format)}


def run_golden(logits, targets, grad_loss, **attrs):
    return golden.cross_entropy(logits, targets, grad_loss, **attrs)


# ---------------------------------------------------------------- roofline

def compulsory_bytes(p: Mapping) -> int:
    """Logits read once and dlogits written once (2 N V element size), the int64 targets
    read, the fp32 upstream gradient read and loss written (one each, or N for none)."""
    es = torch.finfo(mk.DTYPES[p["dtype"]]).bits // 8
    N, V = p["batch"] * p["seq"], p["vocab"]
    per_loss = 4 * (N if p["reduction"] == "none" else 1)
    return 2 * N * V * es + 8 * N + 2 * per_loss


def flops(p: Mapping) -> int:
    """Per element: max, subtract, exp, sum (4), the gradient's scale and subtraction (2),
    smoothing's sum (1), softcap's divide, tanh, multiply and derivative (4)."""
    per = 6 + (1 if p["label_smoothing"] else 0) + (4 if p["softcap"] else 0)
    return p["batch"] * p["seq"] * p["vocab"] * per


SPEC = register_op(OpSpec(
    name="cross_entropy",
    doc="cross entropy forward and backward in one call (smoothing, z-loss, softcap, "
        "shift, masks, accumulation): loss, dlogits",
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
