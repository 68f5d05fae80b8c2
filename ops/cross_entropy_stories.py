"""The cross_entropy op in float64 under one changed hypothesis each: the exact terms of
its diagnosis (ops/cross_entropy_diagnosis.py), each "the hypothesis minus the op".

`_trainer` evaluates the formulas of `golden.cross_entropy` per implementation call,
inside the trainer's loop of `ops.cross_entropy.invoke` for accumulation, so that a
hypothesis about one call (its mean, its shift, its upstream gradient) holds per
micro-batch as a kernel's bug does. A hypothesis is a name that `_align` and `_call`
read; `HYPOTHESES` gives its words and the cases it applies to. When it is the bug, the
error reads "+1.00 x" its term.
"""

from __future__ import annotations

from typing import Mapping

import torch

from bwd_suite.ops.cross_entropy_labels import aligned
from bwd_suite.suite.diagnosis import Evidence, Term
from bwd_suite.suite.inputs import DTYPES

OUTPUTS = ("loss", "dlogits")
# PyTorch's ignore_index, which a port may test labels against in place of the attribute
DEFAULT_IGNORE_INDEX = -100
# the terms cost about fifteen float64 evaluations of the op: left out beyond this size
MAX_TERM_ELEMENTS = 1 << 24


def _align(targets, shift, seq_len, ignore_index, hyp):
    out = torch.full_like(targets, ignore_index)
    if not shift or hyp == "shift_missing":
        return targets.clone()
    if hyp == "shift_crosses":
        out[:-1] = targets[1:]
        return out
    if hyp == "shift_time_major":
        # (seq_len, batch) storage read: the label of flat position i + batch
        t, o = targets.reshape(seq_len, -1), out.reshape(seq_len, -1)
        o[:-1] = t[1:]
        return out
    t, o = targets.reshape(-1, seq_len), out.reshape(-1, seq_len)
    o[:, :-1] = t[:, 1:]
    return out


def _call(x, targets, g, a: Mapping, hyp, dtype):
    """One implementation call in float64 under hypothesis `hyp` (None: the op)."""
    N, V = x.shape
    # PyTorch's default where the attribute belongs: labels equal to it are scored
    ii = DEFAULT_IGNORE_INDEX if hyp == "ignore_index_default" else a["ignore_index"]
    y = _align(targets, a["shift"], a["seq_len"], ii, hyp)
    valid = y != ii
    c, eps, z = a["softcap"], a["label_smoothing"], a["z_loss"]
    # the cap factor left out: tanh(x / c), whose derivative is (1 - tanh^2) / c
    cap = 1.0 if hyp == "softcap_without_factor" else c
    xc = cap * torch.tanh(x / c) if c else x
    m = xc.max(dim=1, keepdim=True).values if V else xc.new_zeros(N, 1)
    lse = m.squeeze(1) + (xc - m).exp().sum(dim=1).log()
    if hyp == "lse_rounded":
        lse = lse.to(dtype).to(torch.float64)
    p = (xc - lse[:, None]).exp()
    onehot = torch.zeros_like(x).scatter_(1, torch.where(valid, y, 0)[:, None], 1.0)
    smooth = (1 - onehot) / (V - 1) if hyp == "smoothing_v_minus_1" and V > 1 else \
        torch.full_like(x, 1.0 / V)
    loss = (1 - eps) * (lse - (xc * onehot).sum(1)) + eps * (lse - (smooth * xc).sum(1)) + \
        z * lse * lse
    zg = 0.0 if hyp == "z_loss_grad_missing" else 2 * z * lse[:, None]
    grad = p * (1 + zg) - (1 - eps) * onehot - eps * smooth
    grad = torch.where(valid[:, None], grad, p if hyp == "ignored_grad" else 0.0)
    if c and hyp != "softcap_derivative_missing":
        grad = grad * (cap / c) / torch.cosh(x / c).square()
    loss = torch.where(valid, loss, 0.0)
    if a["reduction"] == "none":
        # the upstream gradient read as one number: its first element for every row
        up = g.reshape(-1)[:1] if hyp == "none_grad_first" else g
        return loss, up[:, None] * grad
    w = 1.0
    if a["reduction"] == "mean":
        if hyp == "mean_all_tokens":
            count = N
        elif hyp == "mean_count_unshifted":  # the labels as given, before the shift
            count = int((targets != a["ignore_index"]).sum())
        else:
            count = int(valid.sum())
        w = 1.0 / max(count, 1)
    return (w * loss).sum(), (g * w) * grad


def _trainer(t: Mapping, a: Mapping, p: Mapping, hyp=None) -> dict:
    """{loss, dlogits} of the case in float64 under `hyp`, the trainer's loop of
    `ops.cross_entropy.invoke` around the calls."""
    x, y, g = t["logits"], t["targets"], t["grad_loss"]
    dtype = DTYPES[p["dtype"]]
    k = p["accumulation"]
    if k == 1:
        loss, d = _call(x, y, g, a, hyp, dtype)
        return {"loss": loss, "dlogits": d}
    red = a["reduction"]
    if red == "mean" and p["normalize"] == "global_tokens":
        scored = aligned(y, a["shift"], a["seq_len"], a["ignore_index"])
        div = max(int((scored != a["ignore_index"]).sum()), 1)
        ca, cg = dict(a, reduction="sum"), g / div
    elif red == "mean":
        ca, cg, div = a, g / k, k
    else:
        ca, cg, div = a, g, 1
    rows = x.shape[0] // k
    losses, grads = [], []
    for i in range(k):
        s = slice(i * rows, (i + 1) * rows)
        loss, d = _call(x[s], y[s], cg[s] if red == "none" else cg, ca, hyp, dtype)
        losses.append(loss)
        grads.append(d)
    loss = torch.cat(losses) if red == "none" else torch.stack(losses).sum() / div
    return {"loss": loss, "dlogits": torch.cat(grads)}


# (hypothesis, words, applies to the case's attributes and parameters)
HYPOTHESES = (
    ("mean_all_tokens", "the mean over every token, ignored ones included",
     lambda a, p: a["reduction"] == "mean"),
    ("shift_missing", "the loss on labels not shifted", lambda a, p: a["shift"]),
    ("shift_crosses", "the loss on the flat batch shifted across sequences",
     lambda a, p: a["shift"]),
    ("ignored_grad", "the softmax p as the gradient of ignored tokens", lambda a, p: True),
    ("smoothing_v_minus_1", "the smoothing spread over V - 1 classes",
     lambda a, p: a["label_smoothing"] > 0 and p["vocab"] > 1),
    ("z_loss_grad_missing", "dlogits without the z-loss gradient 2 z lse p",
     lambda a, p: a["z_loss"] > 0),
    ("softcap_derivative_missing", "dlogits without the softcap derivative 1 - tanh^2",
     lambda a, p: a["softcap"] > 0),
    # fp32 too: at logit scale 100 an fp32 lse leaves p - 1 of near one-hot rows beyond
    # the tolerance (torch's fp32 log-softmax backward keeps those digits)
    ("lse_rounded", "the lse rounded to the logits dtype", lambda a, p: True),
    ("softcap_without_factor", "the capped logits tanh(x / c), without the factor c",
     lambda a, p: a["softcap"] > 0 and a["softcap"] != 1),
    # only inside the vocabulary: a label of -1 scored has no class to score
    ("ignore_index_default", "labels tested against -100, not the ignore_index attribute",
     lambda a, p: a["ignore_index"] != DEFAULT_IGNORE_INDEX
     and 0 <= a["ignore_index"] < p["vocab"]),
    ("mean_count_unshifted", "the mean's count taken on the labels before the shift",
     lambda a, p: a["reduction"] == "mean" and a["shift"]),
    ("none_grad_first", "the upstream gradient of reduction none read as its first "
     "element for every row", lambda a, p: a["reduction"] == "none"),
    ("shift_time_major", "the labels shifted on a (seq_len, batch) view, not "
     "(batch, seq_len)", lambda a, p: a["shift"]),
)


def terms(p: Mapping, t: Mapping, attrs: Mapping, ev: Evidence) -> dict:
    """Each applicable hypothesis minus the op, for every wrong (finite) output."""
    wrong = [o for o in OUTPUTS if o in ev.wrong]
    found = {o: [] for o in wrong}
    if not wrong or t["logits"].numel() > MAX_TERM_ELEMENTS:
        return found
    a = {k: v for k, v in attrs.items() if k not in ("accumulation", "normalize")}
    base = _trainer(t, a, p)
    for hyp, doc, applies in HYPOTHESES:
        if not applies(a, p):
            continue
        h = _trainer(t, a, p, hyp)
        for o in wrong:
            found[o].append(Term(hyp, doc, h[o] - base[o]))
    return found
