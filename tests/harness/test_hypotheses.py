"""Causes as checked hypotheses (suite/diagnosis/hypotheses.py): each op's golden exposes
its named terms, the diagnosis fits "error = c x term", "the golden with a perturbed
attribute" and "the golden at a shifted or transposed index" to a failing item's error,
names the story that explains it with its residual, and says which came closest when none
does. Ordinary ports with one bug each (written here, not from the mutant zoo), on a few
cases of each op."""

from types import MappingProxyType

import pytest
import torch

from bwd_suite.kernels.adamw.torch_ref import torch_ref as adamw_ref
from bwd_suite.kernels.causal_conv1d.torch_ref import torch_ref as conv_ref
from bwd_suite.kernels.cross_entropy.torch_ref import torch_fp32 as ce_fp32
from bwd_suite.suite import registry
from bwd_suite.suite.cases import Case
from bwd_suite.suite.diagnosis import Evidence, TermFit, diagnose_run
from bwd_suite.suite.diagnosis import hypotheses as hyp
from bwd_suite.suite.registry import Implementation
from bwd_suite.suite.roofline import Ceilings
from bwd_suite.suite.runner import CaseContext, RunOptions, run_item

CPU = torch.device("cpu")
CEIL = Ceilings(device_name="cpu", copy_gbps=None, copy_source="none", peak_tflops=None)
OPTS = RunOptions(device=CPU, golden_device=CPU, repeats=1, timing=False)


def run(op, fn, seed=5, **params):
    spec = registry.op(op)
    p = {**spec.params.defaults(), **params}
    case = Case(op=op, group="hyp", id=f"{op}/hyp/x", tags=frozenset({"ci"}),
                params=MappingProxyType(p), seed=seed, file="<test>")
    impl = Implementation(op=op, name=fn.__name__, fn=fn, kind="external")
    return run_item(CaseContext(spec, case, OPTS), impl, None, CEIL, {})


# ---------------------------------------------------------------- the generic readings

def _ev(*fits, numel=100):
    outs = {f.output for f in fits}
    return Evidence(frozenset(outs), (), tuple(fits), {}, {o: (numel, numel) for o in outs})


@pytest.mark.parametrize("coef, reading", [(-1.0, "missing"), (1.02, "twice"),
                                           (-2.05, "sign"), (0.5, "scaled"), (0.01, None)])
def test_a_term_coefficient_reads_as_missing_twice_sign_or_scaled(coef, reading):
    c = hyp.checks(_ev(TermFit("dx", "term:rowsum", coef, 0.01)))[0]
    assert c.reading == reading
    assert c.explains == (reading is not None)
    if reading:
        assert c.cause == f"term_{reading}:rowsum"


def test_a_fitted_scale_needs_elements_and_a_perturbation_needs_plus_one():
    # a scalar loss is some multiple of any term: no "scaled wrong" from it
    assert not hyp.checks(_ev(TermFit("loss", "term:nll", 0.37, 0.0), numel=1))[0].explains
    assert hyp.checks(_ev(TermFit("loss", "term:nll", -1.0, 0.0), numel=1))[0].explains
    assert not hyp.checks(_ev(TermFit("dx", "attr:eps", 0.5, 0.0)))[0].explains
    assert hyp.checks(_ev(TermFit("dx", "index:shift:1:+1", 1.0, 0.05)))[0].cause == \
        "index_shifted"


def test_the_smallest_residual_names_the_cause_a_fixed_reading_wins_near_ties():
    e = _ev(TermFit("dx", "term:a", 0.7, 0.010), TermFit("dx", "attr:b", 1.0, 0.02),
            TermFit("dx", "term:c", -1.0, 0.5))
    assert hyp.named(e) == {"attribute:b"}  # a fitted scale 0.01 better: a near tie
    e = _ev(TermFit("dx", "term:a", 0.7, 0.01), TermFit("dx", "attr:b", 1.0, 0.1))
    assert hyp.named(e) == {"term_scaled:a"}
    none = _ev(TermFit("dx", "term:a", 0.3, 0.6), TermFit("dx", "index:transposed", 0.2, 0.9))
    assert hyp.named(none) == set()
    assert [c.term for c in hyp.closest(none)] == ["term:a", "index:transposed"]


# ---------------------------------------------------------------- ports of each op

def softmax_no_rowsum(*, y, dy, mask, scale, out):
    g = dy.float() if mask is None else dy.float() * mask * scale
    out["dx"].copy_(y.float() * g)


def softmax_stored_one_column_late(*, y, dy, mask, scale, out):
    yf, g = y.float(), dy.float()
    dx = yf * (g - (g * yf).sum(-1, keepdim=True))
    out["dx"].zero_()
    out["dx"][:, 1:] = dx[:, :-1]  # the store offset off by one


def softmax_dropout_on_y(*, y, dy, mask, scale, out):
    """y taken for the dropout's output: the mask and scale go on y, dy is used as is."""
    yf = y.float() * mask * scale
    g = dy.float()
    out["dx"].copy_(yf * (g - (g * yf).sum(-1, keepdim=True)))


def ln_stats_eps_1e5(*, x, dy, gamma, mean, rstd, out):
    """mean and rstd recomputed from x with eps = 1e-5, the saved ones unused."""
    xf = x.float()
    mu = xf.mean(-1)
    r = torch.rsqrt(((xf - mu[:, None]) ** 2).mean(-1) + 1e-5)
    _ln(x, dy, gamma, mu, r, out)


def _ln(x, dy, gamma, mean, rstd, out, *, rstd_factor=True, mean_g=True, dot_sign=1.0):
    xf, r = x.float(), rstd[:, None]
    xhat = (xf - mean[:, None]) * r
    g = dy.float() * gamma.float() if gamma is not None else dy.float()
    dx = g - (g.mean(-1, keepdim=True) if mean_g else 0) \
        - dot_sign * xhat * (g * xhat).mean(-1, keepdim=True)
    out["dx"].copy_(r * dx if rstd_factor else dx)
    if gamma is not None:
        out["dgamma"].copy_((dy.float() * xhat).sum(0))
        out["dbeta"].copy_(dy.float().sum(0))


def ln_no_mean_g(*, x, dy, gamma, mean, rstd, out):
    _ln(x, dy, gamma, mean, rstd, out, mean_g=False)


def ln_no_rstd(*, x, dy, gamma, mean, rstd, out):
    _ln(x, dy, gamma, mean, rstd, out, rstd_factor=False)


def ln_dot_sign_flipped(*, x, dy, gamma, mean, rstd, out):
    _ln(x, dy, gamma, mean, rstd, out, dot_sign=-1.0)


def adamw_decay_without_lr(**kw):
    adamw_ref(**{**kw, "weight_decay": kw["weight_decay"] / kw["lr"]})


def adamw_betas_swapped(**kw):
    adamw_ref(**{**kw, "beta1": kw["beta2"], "beta2": kw["beta1"]})


def ce_sum_for_mean(**kw):
    ce_fp32(**{**kw, "reduction": "sum" if kw["reduction"] == "mean" else kw["reduction"]})


def conv_taps_flipped(**kw):
    conv_ref(**{**kw, "weight": kw["weight"].flip(-1)})


def attention_no_softcap_derivative(*, q, k, v, o, lse, dout, seq_idx, attn_mask,
                                    dropout_mask, causal, align, window_left, window_right,
                                    softcap, scale, dropout, out):
    """Plain fp32 attention backward (no mask, causal or dropout), softcap applied in the
    forward but its derivative left out of dS."""
    qf, kf, vf, do = (t.float() for t in (q, k, v, dout))
    s = qf @ kf.transpose(-1, -2) * scale
    p = torch.softmax(softcap * torch.tanh(s / softcap), -1)
    dp = do @ vf.transpose(-1, -2)
    ds = p * (dp - (p * dp).sum(-1, keepdim=True))
    out["dq"].copy_(scale * ds @ kf)
    out["dk"].copy_(scale * ds.transpose(-1, -2) @ qf)
    out["dv"].copy_(p.transpose(-1, -2) @ do)


@pytest.mark.parametrize("op, port, params, cause, words", [
    ("softmax", softmax_no_rowsum, dict(rows=13, length=100, dtype="float32"),
     "term_missing:rowsum", "error = -1.00 x the term y * rowsum(y * g)"),
    ("softmax", softmax_stored_one_column_late, dict(rows=13, length=100, dtype="float32"),
     "index_shifted", "dx = the golden one column behind (column i - 1)"),
    ("softmax", softmax_dropout_on_y,
     dict(rows=13, length=100, dtype="float32", dropout=True, p=0.1),
     "attribute:dropout_on_y", "dx computed with the keep mask and scale applied to y"),
    ("layer_norm", ln_stats_eps_1e5,
     dict(rows=13, hidden=100, dtype="float32", eps=1e-3, x_std=1e-3),
     "attribute:stats_default_eps", "dx computed with mean and rstd recomputed from x"),
    ("layer_norm", ln_no_mean_g, dict(rows=13, hidden=100, dtype="float32"),
     "term_missing:mean_g", "error = -1.00 x the term rstd * mean(g)"),
    ("layer_norm", ln_dot_sign_flipped, dict(rows=13, hidden=100, dtype="float32"),
     "term_sign:xhat_dot", "error = -2.00 x the term rstd * xhat * mean(g * xhat)"),
    ("layer_norm", ln_no_rstd, dict(rows=13, hidden=100, dtype="float32"),
     "attribute:rstd_missing", "dx computed without the factor rstd in dx: coefficient +1.00"),
    ("adamw", adamw_decay_without_lr, dict(dtype="float32", weight_decay=0.1),
     "attribute:decay_without_lr", "params computed with the weight decay not times lr"),
    ("adamw", adamw_betas_swapped, dict(dtype="float32"), "attribute:betas_swapped",
     "computed with beta1 and beta2 swapped"),
    ("cross_entropy", ce_sum_for_mean, dict(dtype="float32", reduction="mean"),
     "attribute:reduction_sum", "computed with a sum where the mean belongs"),
    ("causal_conv1d", conv_taps_flipped, dict(dtype="float32", seqlen=40, dim=16),
     "attribute:taps_flipped", "computed with the filter taps in the other order"),
    ("attention", attention_no_softcap_derivative,
     dict(dtype="float32", batch=1, heads=2, kv_heads=2, seq_q=24, seq_k=24, head_dim=16,
          causal=False, softcap=2.0, logit_scale=3.0),
     "term_missing:softcap", "error = -1.00 x the term of the softcap derivative"),
])
def test_a_port_bug_is_named_by_the_story_that_explains_it(op, port, params, cause, words):
    row = run(op, port, **params)
    assert row.verdict == "fail", row.reason
    assert row.diagnosis_cause == cause, row.diagnosis
    assert words in row.diagnosis and "(residual" in row.diagnosis or "residual" in \
        row.diagnosis, row.diagnosis
    title = registry.op(op).diagnosis.cause_spec(cause).title
    assert row.diagnosis.startswith(f"likely {title}"), row.diagnosis
    # the run-level diagnosis reads the stored fits back and names the same cause
    assert diagnose_run([row])[0].cause == cause


def test_an_error_no_story_explains_is_unclassified_with_the_closest_ones():
    def noisy(*, y, dy, mask, scale, out):
        softmax_no_rowsum(y=y, dy=dy, mask=mask, scale=scale, out=out)
        gen = torch.Generator().manual_seed(3)
        out["dx"].add_(0.05 * torch.randn(out["dx"].shape, generator=gen))
    row = run("softmax", noisy, rows=13, length=100, dtype="float32")
    assert row.diagnosis_cause is None
    assert row.diagnosis.startswith("unclassified:") and "closest hypotheses: " in \
        row.diagnosis, row.diagnosis
    d = diagnose_run([row, row])[0]
    assert d.cause is None and "closest hypotheses: " in d.text and "median residual" in \
        d.text, d.text


# ---------------------------------------------------------------- causes without a story

def softmax_in_place(*, y, dy, mask, scale, out):
    """dx right, then dy reused as scratch."""
    yf, g = y.float(), dy.float()
    out["dx"].copy_(yf * (g - (g * yf).sum(-1, keepdim=True)))
    dy.mul_(2.0)


def softmax_16bit_throughout(*, y, dy, mask, scale, out):
    """Every step in the input dtype: no fp32 upcast."""
    out["dx"].copy_(y * (dy - (dy * y).sum(-1, keepdim=True)))


def test_an_input_written_in_place_is_named_from_the_failure_kind():
    row = run("softmax", softmax_in_place, rows=13, length=100, dtype="float32")
    assert row.failure_kind == "input modified"
    assert row.diagnosis_cause == "input_modified", row.diagnosis
    assert diagnose_run([row])[0].cause == "input_modified"


def test_small_unexplained_errors_of_a_16bit_case_read_as_precision():
    row = run("softmax", softmax_16bit_throughout, rows=13, length=1000, dtype="bfloat16",
              logit_scale=30.0)
    assert row.verdict == "fail", row.reason
    assert row.diagnosis_cause == "precision", row.diagnosis
    assert row.diagnosis.startswith("likely arithmetic in too little precision")
