"""The float64 AdamW golden against torch.optim.AdamW (and GradScaler / clip_grad_norm_
semantics) in float64."""

import pytest
import torch

from bwd_suite.golden import adamw as golden

SHAPES = [(7,), (3, 5), (1,)]


def _state(seed, step):
    g = torch.Generator().manual_seed(seed)
    r = lambda s: torch.randn(s, generator=g, dtype=torch.float64)  # noqa: E731
    p = [r(s) for s in SHAPES]
    grads = [r(s) for s in SHAPES]
    if step == 1:
        m = [torch.zeros(s, dtype=torch.float64) for s in SHAPES]
        v = [torch.zeros(s, dtype=torch.float64) for s in SHAPES]
    else:
        m = [0.1 * r(s) for s in SHAPES]
        v = [r(s).square() for s in SHAPES]
    vmax = [x * (1 + r(x.shape).abs()) for x in v]
    return p, grads, m, v, vmax


SETTINGS = [
    dict(),
    dict(amsgrad=True),
    dict(maximize=True),
    dict(weight_decay=0.3, lr=0.05),
    dict(steps=4, amsgrad=True, maximize=True),
    dict(step=2, steps=3, weight_decay=0.1),
    dict(step=1000, amsgrad=True),
    dict(betas=(0.5, 0.9), eps=1e-3, step=5),
    dict(lr=0.0, weight_decay=0.1, step=2),
]


@pytest.mark.parametrize("setting", SETTINGS, ids=[str(s) for s in SETTINGS])
def test_golden_matches_torch_optim_adamw_in_float64(setting):
    s = dict(lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False,
             maximize=False, step=1, steps=1) | setting
    p, grads, m, v, vmax = _state(3, s["step"])
    want = golden.adamw(p, grads, None, m, v, vmax, lr=s["lr"], beta1=s["betas"][0],
                        beta2=s["betas"][1], eps=s["eps"], weight_decay=s["weight_decay"],
                        step=s["step"], steps=s["steps"], maximize=s["maximize"],
                        amsgrad=s["amsgrad"], loss_scale=1.0, max_norm=0.0)
    ps = [torch.nn.Parameter(x.clone()) for x in p]
    opt = torch.optim.AdamW(ps, lr=s["lr"], betas=s["betas"], eps=s["eps"],
                            weight_decay=s["weight_decay"], amsgrad=s["amsgrad"],
                            maximize=s["maximize"], foreach=False)
    for i, x in enumerate(ps):  # the optimizer's state after step - 1 steps
        st = opt.state[x]
        st["step"] = torch.tensor(float(s["step"] - 1), dtype=torch.float64)
        st["exp_avg"], st["exp_avg_sq"] = m[i].clone(), v[i].clone()
        if s["amsgrad"]:
            st["max_exp_avg_sq"] = vmax[i].clone()
    for _ in range(s["steps"]):
        for x, g in zip(ps, grads):
            x.grad = g.clone()
        opt.step()
    # it moved (lr = 0: only the moments do)
    assert torch.equal(want["params"][0], p[0]) == (s["lr"] == 0)
    assert not torch.equal(want["exp_avg"][0], m[0])
    for i, x in enumerate(ps):
        st = opt.state[x]
        torch.testing.assert_close(want["params"][i], x.detach(), rtol=1e-13, atol=1e-15)
        torch.testing.assert_close(want["exp_avg"][i], st["exp_avg"], rtol=1e-13, atol=1e-15)
        torch.testing.assert_close(want["exp_avg_sq"][i], st["exp_avg_sq"], rtol=1e-13,
                                   atol=1e-15)
        if s["amsgrad"]:
            torch.testing.assert_close(want["max_exp_avg_sq"][i], st["max_exp_avg_sq"],
                                       rtol=1e-13, atol=1e-15)
    assert want["found_inf"].item() == 0


def test_unscale_and_clip_match_clip_grad_norm():
    p, grads, *_ = _state(5, 1)
    scaled = [g * 1024 for g in grads]
    got, found = golden.unscale_clip(scaled, 1024.0, 0.5)
    ps = [torch.nn.Parameter(x.clone()) for x in p]
    for x, g in zip(ps, grads):
        x.grad = g.clone()
    torch.nn.utils.clip_grad_norm_(ps, 0.5)
    assert not found
    for a, x in zip(got, ps):
        torch.testing.assert_close(a, x.grad, rtol=1e-13, atol=0)
    # a norm below max_norm leaves them as they are (the coefficient is capped at 1)
    same, _ = golden.unscale_clip(grads, 1.0, 1e6)
    assert all(torch.equal(a, b) for a, b in zip(same, grads))


@pytest.mark.parametrize("bad", [float("inf"), float("nan")])
def test_an_inf_or_nan_anywhere_skips_every_tensor(bad):
    p, grads, m, v, vmax = _state(7, 2)
    grads[2][0] = bad
    out = golden.adamw(p, grads, None, m, v, vmax, lr=1e-2, beta1=0.9, beta2=0.999,
                       eps=1e-8, weight_decay=0.1, step=2, steps=2, maximize=False,
                       amsgrad=True, loss_scale=8.0, max_norm=1.0)
    assert out["found_inf"].item() == 1
    for k, ref in (("params", p), ("exp_avg", m), ("exp_avg_sq", v),
                   ("max_exp_avg_sq", vmax)):
        assert all(torch.equal(a, b) for a, b in zip(out[k], ref)), k


def test_without_a_scaler_an_inf_is_not_checked_and_the_step_runs():
    # a plain optimizer.step(): nothing skips, and the inf turns its parameter NaN
    p, grads, m, v, _ = _state(7, 2)
    grads[1].view(-1)[0] = float("inf")
    out = golden.adamw(p, grads, None, m, v, None, lr=1e-2, beta1=0.9, beta2=0.999,
                       eps=1e-8, weight_decay=0.1, step=2, steps=1, maximize=False,
                       amsgrad=False, loss_scale=1.0, max_norm=0.0, scaler=False)
    assert out["found_inf"].item() == 0
    assert torch.isnan(out["params"][1].view(-1)[0]) and not torch.equal(out["params"][0], p[0])


def test_master_weights_are_what_is_updated():
    p, grads, m, v, vmax = _state(9, 1)
    master = [x + 0.25 for x in p]  # the parameters themselves are ignored
    kw = dict(lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0, step=1, steps=1,
              maximize=False, amsgrad=False, loss_scale=1.0, max_norm=0.0)
    with_master = golden.adamw(p, grads, master, m, v, None, **kw)
    plain = golden.adamw(master, grads, None, m, v, None, **kw)
    for a, b, c in zip(with_master["params"], with_master["master"], plain["params"]):
        assert torch.equal(a, b) and torch.equal(a, c)
