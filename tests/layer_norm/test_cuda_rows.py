"""Our CUDA LayerNorm backward on row layouts the case files do not produce (GPU only):
padded row strides with a hidden size that is not a multiple of the 16-byte vector (the
shared-memory ring's partial-vector copies), fewer rows than a block has row groups, and
rows that wrap the persistent grid several times. Against float64 formulas; the padding
columns of dx are poisoned and must stay untouched; repeats are bitwise equal."""

import pytest
import torch

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

TOL = {torch.float32: 2e-5, torch.bfloat16: 1e-2, torch.float16: 2e-3}


def _reference(x, dy, gamma, mean, rstd):
    x, dy, g = x.double(), dy.double(), gamma.double()
    xhat = (x - mean.double()[:, None]) * rstd.double()[:, None]
    gd = dy * g
    dx = rstd.double()[:, None] * (gd - gd.mean(1, keepdim=True)
                                   - xhat * (gd * xhat).mean(1, keepdim=True))
    return dx, (dy * xhat).sum(0), dy.sum(0)


def _inputs(rows, n, dtype, pad, gamma_dtype, seed=0):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    wide = torch.randn(rows, n + pad, generator=gen, device="cuda") * 2 + 0.5
    x = wide.to(dtype)[:, :n]  # row stride n + pad
    dy = torch.randn(rows, n + pad, generator=gen, device="cuda").to(dtype)[:, :n]
    gamma = torch.randn(n, generator=gen, device="cuda").to(gamma_dtype)
    xd = x.double()
    mean = xd.mean(1).float()
    rstd = (xd.var(1, unbiased=False) + 1e-5).rsqrt().float()
    return x, dy, gamma, mean, rstd


def _run(ext, x, dy, gamma, mean, rstd, pad):
    rows, n = x.shape
    dx_wide = torch.full((rows, n + pad), float("nan"), device="cuda", dtype=x.dtype)
    dx = dx_wide[:, :n]
    dg, db = torch.empty_like(gamma), torch.empty_like(gamma)
    ext.bwd(x, dy, gamma, mean, rstd, dx, dg, db)
    torch.cuda.synchronize()
    return dx_wide, dg, db


@needs_cuda
@pytest.mark.parametrize("rows,n,pad,dtype,gamma_dtype", [
    (37, 1001, 7, torch.bfloat16, torch.float32),  # stride 1008: last vector 1 of 8 columns
    (37, 1003, 5, torch.float16, torch.float16),   # ... 3 of 8; gamma in x's dtype
    (37, 1002, 2, torch.float32, torch.float32),   # stride 1004: last vector 2 of 4
    (3, 256, 0, torch.bfloat16, torch.float32),    # blocks of 16 groups: groups without a row
    (3, 2048, 0, torch.bfloat16, torch.float32),   # ... with named barriers (8 warps a group)
    (5000, 64, 0, torch.float32, torch.float32),   # rows wrap the persistent grid many times
    (257, 8192, 0, torch.bfloat16, torch.float32),  # one group of 1024 threads a block
    (129, 6000, 8, torch.float32, torch.float32),  # two vectors a thread, the second past n
])
def test_rows_against_float64_and_padding_untouched(rows, n, pad, dtype, gamma_dtype):
    from bwd_suite.kernels.layer_norm import cuda as ln_cuda

    ext = ln_cuda.extension()
    x, dy, gamma, mean, rstd = _inputs(rows, n, dtype, pad, gamma_dtype)
    dx_wide, dg, db = _run(ext, x, dy, gamma, mean, rstd, pad)
    dx_ref, dg_ref, db_ref = _reference(x, dy, gamma, mean, rstd)
    tol = TOL[dtype]
    scale = dx_ref.abs().max().item()
    torch.testing.assert_close(dx_wide[:, :n].double(), dx_ref, rtol=tol, atol=tol * scale)
    # dgamma/dbeta: fp32 sums of the same inputs, rounded once to gamma's dtype
    gtol = TOL[gamma_dtype] if gamma_dtype != torch.float32 else 1e-4
    torch.testing.assert_close(dg.double(), dg_ref, rtol=gtol,
                               atol=gtol * dg_ref.abs().max().item())
    torch.testing.assert_close(db.double(), db_ref, rtol=gtol,
                               atol=gtol * db_ref.abs().max().item())
    if pad:
        assert torch.isnan(dx_wide[:, n:]).all(), "the kernel wrote past the row's end"
    again = _run(ext, x, dy, gamma, mean, rstd, pad)
    for a, b in zip((dx_wide[:, :n], dg, db), (again[0][:, :n], again[1], again[2])):
        bits = torch.int16 if a.element_size() == 2 else torch.int32
        assert torch.equal(a.view(bits), b.view(bits)), "not bitwise equal run to run"


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_one_column_with_a_huge_rstd_gives_an_exact_zero_dx(dtype):
    """Hidden size 1: xhat = 0 and g - mean(g) = 0 exactly, so dx is exactly 0 whatever
    rstd is. A g computed once rounded (for the row sums) and once inside a fused
    multiply-add leaves the product's rounding error times rstd (1e6 at eps 1e-12); the
    case files cannot see it, since the conditioning bound at this rstd is huge."""
    from bwd_suite.kernels.layer_norm import cuda as ln_cuda

    gen = torch.Generator(device="cuda").manual_seed(1)
    x = torch.randn(37, 1, generator=gen, device="cuda").to(dtype)
    dy = torch.randn(37, 1, generator=gen, device="cuda").to(dtype)
    gamma = torch.randn(1, generator=gen, device="cuda")
    mean = x.float()[:, 0]
    rstd = torch.full((37,), 1e6, device="cuda")
    dx, _, _ = _run(ln_cuda.extension(), x, dy, gamma, mean, rstd, 0)
    assert torch.equal(dx, torch.zeros_like(dx)), dx.flatten()[:8]
