"""Checks of the float64 golden (golden/softmax.py) that never use the golden to check
itself:

1. golden.backward == torch.autograd of softmax(x) then dropout with the fixed mask, in
   float64, on every smoke case of the repository's case files (inputs from the op's own
   input factory; x = log(y), so that y' = softmax(x) is the case's y renormalised in
   float64, and the golden is given that y');
2. torch.autograd.gradcheck of an autograd.Function whose backward is the golden (its
   vector-Jacobian product against finite differences of the forward), on tiny shapes;
3. tiny examples worked out by hand, and the exact zeros: fully dropped rows and N = 1.
"""

from __future__ import annotations

import pytest
import torch

from bwd_suite.golden import softmax as golden
from bwd_suite.suite import registry
from tests.golden_support import one_thread, rel_err, smoke_case_params  # noqa: F401 - fixture

OP = "softmax"
CPU = torch.device("cpu")
F64 = torch.float64


# ============================================================ 1. backward == autograd


def _autograd_dx(x, dy, keep, scale):
    """d/dx of sum(dropout(softmax(x)) * dy) by autograd; also returns softmax(x)."""
    leaf = x.detach().clone().requires_grad_(True)
    y = torch.softmax(leaf, dim=-1)
    out = y if keep is None else y * keep.to(F64) * scale
    (dx,) = torch.autograd.grad(out, leaf, dy)
    return dx, y.detach()


@pytest.mark.parametrize("case", smoke_case_params(OP))
def test_backward_matches_autograd_on_smoke_cases(case):
    if isinstance(case, Exception):
        pytest.fail(f"the repository's case files do not load: {case}")
    spec = registry.op(OP)
    inputs = spec.make_inputs(case.params, case.seed, CPU)
    t, scale = inputs.tensors, inputs.attrs["scale"]
    y_case, dy, keep = t["y"].to(F64), t["dy"].to(F64), t["mask"]
    assert (keep is None) == (not case.params["dropout"])
    assert (scale is None) == (keep is None)

    x = y_case.log()  # -inf where y underflowed: softmax gives 0 there, gradient 0
    ref, y = _autograd_dx(x, dy, keep, scale)
    assert torch.isfinite(ref).all()
    got = golden.backward(y, dy, mask=keep, scale=scale)
    assert set(got) == {o.name for o in spec.outputs(case.params)} == {"dx"}
    assert got["dx"].dtype == F64
    err = rel_err(got["dx"], ref)
    assert err <= 1e-12, f"{case.id}: dx differs from autograd by {err:.3g} (rel)"

    # the op's golden hook takes the case-dtype y as is (no renormalisation)
    hook = spec.golden(y=y_case, dy=dy, mask=keep, scale=scale)["dx"]
    assert torch.equal(hook, golden.backward(y_case, dy, keep, scale)["dx"])


# ============================================================ 2. gradcheck

class _SoftmaxDropout(torch.autograd.Function):
    """Forward softmax(x) * keep * scale; backward = the golden (from the saved y)."""

    @staticmethod
    def forward(ctx, x, keep, scale):
        y = torch.softmax(x, dim=-1)
        ctx.save_for_backward(y, keep)
        ctx.scale = scale
        return y if keep is None else y * keep.to(y.dtype) * scale

    @staticmethod
    def backward(ctx, dout):
        y, keep = ctx.saved_tensors
        return golden.backward(y, dout, mask=keep, scale=ctx.scale)["dx"], None, None


def _tiny(rows, n, with_dropout, seed):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, n, generator=gen, dtype=F64) * 2
    keep, scale = None, None
    if with_dropout:
        keep = torch.rand(rows, n, generator=gen) >= 0.3
        keep[0] = False  # a fully dropped row
        scale = 1 / 0.7
    return x, keep, scale


@pytest.mark.parametrize("with_dropout", [False, True], ids=["plain", "dropout"])
@pytest.mark.parametrize("n", [1, 2, 3, 5, 8])
def test_golden_vjp_passes_gradcheck(n, with_dropout):
    x, keep, scale = _tiny(3, n, with_dropout, seed=10 * n + with_dropout)
    f = lambda x: _SoftmaxDropout.apply(x, keep, scale)  # noqa: E731
    assert torch.autograd.gradcheck(f, (x.requires_grad_(True),), eps=1e-6, atol=1e-9,
                                    rtol=1e-7)


def test_golden_matches_explicit_jacobian():
    """dx = J^T g with J = diag(y) - y y^T built element by element."""
    x, keep, scale = _tiny(2, 6, True, seed=3)
    keep[0, 0] = True  # keep row 0 partly alive
    gen = torch.Generator().manual_seed(4)
    dy = torch.randn(2, 6, generator=gen, dtype=F64)
    y = torch.softmax(x, -1)
    dx = golden.backward(y, dy, keep, scale)["dx"]
    for r in range(2):
        g = dy[r] * keep[r] * scale
        jac = torch.tensor([[y[r, i] * (float(i == j) - y[r, j]) for j in range(6)]
                            for i in range(6)], dtype=F64)
        assert rel_err(dx[r], jac.T @ g) <= 1e-14


# ============================================================ 3. by hand, exact zeros

def test_two_elements_by_hand():
    """y = [1/4, 3/4], dy = [1, 3]: sum(dy y) = 1/4 + 9/4 = 5/2, so
    dx = [1/4 (1 - 5/2), 3/4 (3 - 5/2)] = [-3/8, 3/8]. With keep = [1, 0] and scale 2:
    g = [2, 0], sum(g y) = 1/2, dx = [1/4 * 3/2, 3/4 * (-1/2)] = [3/8, -3/8]."""
    y = torch.tensor([[0.25, 0.75]], dtype=F64)
    dy = torch.tensor([[1.0, 3.0]], dtype=F64)
    assert golden.backward(y, dy)["dx"].tolist() == [[-0.375, 0.375]]
    keep = torch.tensor([[True, False]])
    assert golden.backward(y, dy, keep, 2.0)["dx"].tolist() == [[0.375, -0.375]]
    # the scale alone multiplies dx (all kept)
    all_kept = torch.ones(1, 2, dtype=torch.bool)
    assert golden.backward(y, dy, all_kept, 2.0)["dx"].tolist() == [[-0.75, 0.75]]


def test_uniform_row_by_hand():
    """y = 1/N: dx_j = (dy_j - mean(dy)) / N."""
    n = 4
    y = torch.full((1, n), 1 / n, dtype=F64)
    dy = torch.tensor([[1.0, 2.0, 3.0, 6.0]], dtype=F64)  # mean 3
    assert golden.backward(y, dy)["dx"].tolist() == [[-0.5, -0.25, 0.0, 0.75]]


def test_rows_of_dx_sum_to_zero_when_y_sums_to_one():
    x, keep, scale = _tiny(4, 9, True, seed=11)
    dy = torch.randn(4, 9, generator=torch.Generator().manual_seed(12), dtype=F64)
    dx = golden.backward(torch.softmax(x, -1), dy, keep, scale)["dx"]
    assert dx.sum(-1).abs().max().item() <= 1e-15


def test_length_one_gives_zero():
    y = torch.ones(5, 1, dtype=F64)
    dy = torch.randn(5, 1, generator=torch.Generator().manual_seed(1), dtype=F64)
    assert torch.equal(golden.backward(y, dy)["dx"], torch.zeros(5, 1, dtype=F64))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_fully_dropped_rows_give_exact_zeros(dtype):
    """The op's all_dropped_rows pattern: rows 1, 4, 7, ... are fully dropped (dx = 0
    exactly, in the golden and in both eager implementations), rows 2, 5, ... fully kept."""
    spec = registry.op(OP)
    p = dict(spec.params.defaults(), rows=10, length=37, dtype=dtype, dropout=True, p=0.3,
             mask="all_dropped_rows")
    inputs = spec.make_inputs(p, seed=5, device=CPU)
    t, scale = inputs.tensors, inputs.attrs["scale"]
    keep = t["mask"]
    assert not keep[1::3].any() and keep[2::3].all()
    assert keep[0::3].any() and not keep[0::3].all()
    dx = golden.backward(t["y"].to(F64), t["dy"].to(F64), keep, scale)["dx"]
    assert torch.equal(dx[1::3], torch.zeros_like(dx[1::3]))
    assert dx[0::3].abs().max() > 0 and dx[2::3].abs().max() > 0

    for impl in registry.implementations(OP):
        # mutants are broken on purpose (one inverts the mask): not held to this
        if impl.kind == "mutant" or impl.unsupported_reason(p, "cpu"):
            continue
        out = {"dx": torch.full_like(t["y"], float("nan"))}
        impl.fn(**t, **inputs.attrs, out=out)
        assert torch.equal(out["dx"][1::3], torch.zeros_like(out["dx"][1::3])), impl.name


def test_mask_without_scale_is_refused():
    y = torch.full((1, 2), 0.5, dtype=F64)
    with pytest.raises(ValueError, match="scale"):
        golden.backward(y, y, mask=torch.ones(1, 2, dtype=torch.bool))
