"""The two algebraic forms of the LayerNorm dx (seed 002, section 2), eager PyTorch in fp32.

Both read x, dy and gamma in their own dtypes, compute in fp32 from the saved fp32 mean
and rstd, and round dx once to x's dtype; dgamma and dbeta are the same in both
(sum over rows of dy * xhat and of dy in fp32, rounded to gamma's dtype). With g = dy*gamma
and sums over the row of length N:

  x-hat form (HW4, PyTorch, Liger): xhat = (x - mean) * rstd,
      dx = rstd * (g - sum(g)/N - xhat * sum(g * xhat)/N)
  x form (the slides and the LightSeq2 paper): with sigma = 1/rstd,
      dx = g/sigma + alpha * sum(g) + beta * sum(g * x),
      alpha = ((x - mean) * mean - sigma^2) / (N sigma^3),  beta = (mean - x) / (N sigma^3)

The x form sums g * x on the raw x: on rows with a large mean mu the terms alpha*sum(g)
and beta*sum(g*x) each carry a part proportional to mu (x - mu) sum(g) / (N sigma^3) that
cancels, so its rounding error grows like eps * mu / (sigma sqrt(N)); the x-hat form sums
quantities of order 1 and has no such cancellation.
"""

from __future__ import annotations


from bwd_suite.suite.registry import implementation


def _common(x, dy, gamma, mean, rstd):
    x32, dy32 = x.float(), dy.float()
    m, r = mean.float()[:, None], rstd.float()[:, None]
    g = dy32 * gamma.float() if gamma is not None else dy32
    xhat = (x32 - m) * r
    return x32, dy32, m, r, g, xhat


def _weights(dy32, xhat, gamma, out):
    if gamma is not None:
        out["dgamma"].copy_((dy32 * xhat).sum(0))
        out["dbeta"].copy_(dy32.sum(0))


@implementation("layer_norm", "xhat_form", kind="reference")
def xhat_form(*, x, dy, gamma, mean, rstd, out):
    """dx = rstd (g - mean(g) - xhat mean(g xhat)) in fp32 (seed 002's HW4 form)"""
    x32, dy32, m, r, g, xhat = _common(x, dy, gamma, mean, rstd)
    N = x.shape[-1]
    c1 = g.sum(-1, keepdim=True) / N
    c2 = (g * xhat).sum(-1, keepdim=True) / N
    out["dx"].copy_(r * (g - c1 - xhat * c2))
    _weights(dy32, xhat, gamma, out)


@implementation("layer_norm", "x_form", kind="reference")
def x_form(*, x, dy, gamma, mean, rstd, out):
    """dx = g/sigma + alpha sum(g) + beta sum(g x) in fp32 (seed 002's slides form)"""
    x32, dy32, m, r, g, xhat = _common(x, dy, gamma, mean, rstd)
    N = x.shape[-1]
    sigma = 1.0 / r
    s_g = g.sum(-1, keepdim=True)
    s_gx = (g * x32).sum(-1, keepdim=True)
    nsig3 = N * sigma ** 3
    alpha = ((x32 - m) * m - sigma * sigma) / nsig3
    beta = (m - x32) / nsig3
    out["dx"].copy_(g * r + alpha * s_g + beta * s_gx)
    _weights(dy32, xhat, gamma, out)
