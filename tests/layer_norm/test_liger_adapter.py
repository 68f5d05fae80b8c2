"""kernels/layer_norm/liger.py wires Liger's backward kernel to the suite's outputs: on the
CPU, a stand-in for `_layer_norm_backward_kernel` that does in torch what Liger's Triton
kernel does to the pointers and strides it is given (one program per block of rows, dW/dB
partial rows) shows that every argument is the right tensor at the right stride: dx lands in
the suite's own dx (a padded row stride here), dgamma and dbeta are the programs' sums."""

import math
from types import SimpleNamespace

import pytest
import torch

import bwd_suite.kernels.layer_norm.liger as adapter
from bwd_suite.golden import layer_norm as golden


class FakeKernel:
    """Liger 0.8.5's _layer_norm_backward_kernel, in torch: kernel[grid](*args, **meta)."""

    def __init__(self, arg_names=adapter.KERNEL_ARGS):
        self.arg_names = arg_names
        self.launches = []

    def __getitem__(self, grid):
        def run(*args, num_warps, **meta):
            a = dict(zip(self.arg_names, args), **meta)
            self.launches.append((grid, num_warps, a["BLOCK_SIZE"]))
            rows, n, rpp = a["n_rows"], a["n_cols"], a["rows_per_program"]
            view = lambda t, s: torch.as_strided(t, (rows, n), (s, 1))  # noqa: E731
            x, dy, dx = view(a["X_ptr"], a["stride_x"]), view(a["DY_ptr"], a["stride_dy"]), \
                view(a["DX_ptr"], a["stride_dx"])
            mean = torch.as_strided(a["Mean_ptr"], (rows,), (a["stride_mean"],))
            rstd = torch.as_strided(a["RSTD_ptr"], (rows,), (a["stride_rstd"],))
            w = a["W_ptr"].float()
            for pid in range(grid[0]):
                dw = torch.zeros(n)
                db = torch.zeros(n)
                for r in range(pid * rpp, min((pid + 1) * rpp, rows)):
                    xh = (x[r].float() - mean[r]) * rstd[r]
                    wdy = w * dy[r].float()
                    c1, c2 = (xh * wdy).sum() / n, wdy.sum() / n
                    dx[r] = ((wdy - (xh * c1 + c2)) * rstd[r]).to(dx.dtype)
                    dw += dy[r].float() * xh
                    db += dy[r].float()
                torch.as_strided(a["DW_ptr"], (n,), (1,), pid * a["stride_dw"]).copy_(dw)
                torch.as_strided(a["DB_ptr"], (n,), (1,), pid * a["stride_db"]).copy_(db)
        return run


def _problem(rows, n, dtype, gamma_dtype):
    g = torch.Generator().manual_seed(rows * 1000 + n)
    x = (torch.randn(rows, n, generator=g) * 2 + 3).to(dtype)
    dy = torch.randn(rows, n, generator=g).to(dtype)
    gamma = (1 + 0.5 * torch.randn(n, generator=g)).to(gamma_dtype)
    mean, rstd = golden.statistics(x.double(), 1e-5)
    want = golden.backward(x.double(), dy.double(), mean, rstd, gamma=gamma.double())
    return x, dy, gamma, mean.float(), rstd.float(), want


def _outputs(rows, n, dtype, gamma_dtype, pad):
    dx = torch.full((rows, n + pad), float("nan"), dtype=dtype)[:, :n]  # padded row stride
    return {"dx": dx, "dgamma": torch.full((n,), float("nan"), dtype=gamma_dtype),
            "dbeta": torch.full((n,), float("nan"), dtype=gamma_dtype)}


@pytest.fixture()
def fake_liger(monkeypatch):
    kernel = FakeKernel()

    def layer_norm_backward(*args):  # the copying path; must not run while the kernel fits
        raise AssertionError("fell back to layer_norm_backward")
    monkeypatch.setattr(adapter, "_lln", SimpleNamespace(_layer_norm_backward_kernel=kernel,
                                                         layer_norm_backward=layer_norm_backward))
    monkeypatch.setattr(adapter, "calculate_settings",
                        lambda n: (1 << max(0, math.ceil(math.log2(n))), 4))
    monkeypatch.setattr(adapter, "_programs", lambda device: 3)
    return kernel


@pytest.mark.parametrize("rows,n,dtype,gamma_dtype,pad", [
    (7, 5, torch.float32, torch.float32, 3),  # 3 programs of 3, 3 and 1 rows
    (10, 16, torch.bfloat16, torch.bfloat16, 0),
    (2, 33, torch.float16, torch.float32, 1),  # fewer rows than programs
])
def test_liger_kernel_writes_into_the_suite_outputs(fake_liger, rows, n, dtype, gamma_dtype, pad):
    x, dy, gamma, mean, rstd, want = _problem(rows, n, dtype, gamma_dtype)
    out = _outputs(rows, n, dtype, gamma_dtype, pad)
    adapter.liger(x=x, dy=dy, gamma=gamma, mean=mean, rstd=rstd, out=out)
    (grid, warps, block), = fake_liger.launches
    assert grid == (3,) and warps == 4 and block >= n
    tol = {torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.float16: 2e-3}
    for name, w in want.items():
        got = out[name].double()
        assert not got.isnan().any(), f"{name} left unwritten"
        scale = w.abs().max().item()
        t = tol[out[name].dtype] * max(scale, 1.0)
        assert (got - w).abs().max().item() <= t, name


def test_other_kernel_arguments_fall_back_to_layer_norm_backward(fake_liger, monkeypatch):
    """A Liger whose kernel takes other arguments gets its own layer_norm_backward, and the
    adapter copies what it returns."""
    x, dy, gamma, mean, rstd, _ = _problem(4, 8, torch.float32, torch.float32)
    calls = []

    def layer_norm_backward(dY, X, W, B, Mean, RSTD):
        calls.append((dY is dy, X is x, W is gamma, Mean is mean, RSTD is rstd, B.dtype))
        return torch.ones(4, 8), torch.full((8,), 2.0), torch.full((8,), 3.0)
    monkeypatch.setattr(adapter, "_lln", SimpleNamespace(
        _layer_norm_backward_kernel=FakeKernel(adapter.KERNEL_ARGS[:-1]),
        layer_norm_backward=layer_norm_backward))
    out = _outputs(4, 8, torch.float32, torch.float32, 0)
    adapter.liger(x=x, dy=dy, gamma=gamma, mean=mean, rstd=rstd, out=out)
    assert calls == [(True, True, True, True, True, torch.float32)]
    assert (out["dx"] == 1).all() and (out["dgamma"] == 2).all() and (out["dbeta"] == 3).all()
