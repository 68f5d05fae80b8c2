"""The float64 cross-entropy golden against torch.autograd through F.cross_entropy in
float64, with the softcap and z-loss terms composed around it."""

import pytest
import torch
import torch.nn.functional as F

from bwd_suite.golden import cross_entropy as golden


def _autograd(x, y, g, *, ignore_index, label_smoothing, reduction, z_loss, softcap):
    x = x.clone().requires_grad_(True)
    xc = softcap * torch.tanh(x / softcap) if softcap else x
    loss = F.cross_entropy(xc, y, ignore_index=ignore_index, reduction=reduction,
                           label_smoothing=label_smoothing)
    valid = y != ignore_index
    zt = torch.where(valid, z_loss * torch.logsumexp(xc, -1) ** 2, 0.0)
    loss = loss + {"none": zt, "sum": zt.sum(), "mean": zt.sum() / valid.sum()}[reduction]
    loss.backward(g)
    return loss.detach(), x.grad


SETTINGS = [
    dict(),
    dict(reduction="sum"),
    dict(reduction="none"),
    dict(label_smoothing=0.1),
    dict(label_smoothing=0.1, reduction="sum", ignore_index=2),
    dict(z_loss=1e-2),
    dict(softcap=3.0),
    dict(softcap=3.0, z_loss=0.1, label_smoothing=0.2, reduction="none"),
    dict(label_smoothing=1.0, z_loss=0.5, softcap=1.0),
]


@pytest.mark.parametrize("setting", SETTINGS, ids=[str(s) for s in SETTINGS])
@pytest.mark.parametrize("V", [1, 2, 31])
def test_golden_matches_autograd_in_float64(setting, V):
    s = dict(ignore_index=-100, label_smoothing=0.0, reduction="mean", z_loss=0.0,
             softcap=0.0) | setting
    gen = torch.Generator().manual_seed(V)
    N = 7
    x = 3 * torch.randn(N, V, generator=gen, dtype=torch.float64)
    y = torch.randint(0, V, (N,), generator=gen)
    y[1] = s["ignore_index"]
    g = torch.randn((N,) if s["reduction"] == "none" else (), generator=gen,
                    dtype=torch.float64)
    want_loss, want_grad = _autograd(x, y, g, **s)
    got = golden.cross_entropy(x, y, g, **s)
    torch.testing.assert_close(got["loss"], want_loss, rtol=1e-12, atol=1e-13)
    torch.testing.assert_close(got["dlogits"], want_grad, rtol=1e-12, atol=1e-13)
    assert not got["dlogits"][1].any()


def test_large_logits_stay_finite():
    x = torch.tensor([[1000.0, 0.0, -1000.0], [-5e3, -5e3, -5e3]], dtype=torch.float64)
    y = torch.tensor([0, 2])
    got = golden.cross_entropy(x, y, torch.tensor(1.0, dtype=torch.float64))
    assert torch.isfinite(got["loss"]) and torch.isfinite(got["dlogits"]).all()
    torch.testing.assert_close(got["loss"], torch.tensor(0.5 * torch.log(torch.tensor(3.0))
                                                         .item(), dtype=torch.float64))


def test_all_ignored_mean_is_zero_with_zero_gradient():
    x = torch.randn(4, 5, dtype=torch.float64)
    y = torch.full((4,), -100)
    got = golden.cross_entropy(x, y, torch.tensor(2.0, dtype=torch.float64), z_loss=0.1,
                               label_smoothing=0.1)
    assert got["loss"].item() == 0 and not got["dlogits"].any()


def test_shift_scores_position_t_against_token_t_plus_1():
    # two sequences of 3; the logits of each row put all mass on one class
    V = 4
    ids = torch.tensor([1, 2, 3, 0, 1, 2])
    x = torch.full((6, V), -30.0, dtype=torch.float64)
    nxt = torch.tensor([2, 3, 0, 1, 2, 0])  # what each row predicts: the next id
    x[torch.arange(6), nxt] = 30.0
    g = torch.tensor(1.0, dtype=torch.float64)
    got = golden.cross_entropy(x, ids, g, shift=True, seq_len=3, reduction="none")
    # rows 0, 1 and 3, 4 predict the next token right; rows 2 and 5 (last) are ignored
    assert got["loss"].max().item() < 1e-20
    assert not got["dlogits"][[2, 5]].any()
    unshifted = golden.cross_entropy(x, ids, g, reduction="none")
    assert (unshifted["loss"][[0, 1, 3, 4]] > 50).all()


def test_global_tokens_accumulation_is_the_whole_batch_mean():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(8, 5, generator=gen, dtype=torch.float64)
    y = torch.randint(0, 5, (8,), generator=gen)
    y[[0, 1, 2]] = -100  # unequal counts: 1 and 4 scored tokens per micro-batch
    g = torch.tensor(1.5, dtype=torch.float64)
    whole = golden.cross_entropy(x, y, g)
    acc = golden.cross_entropy(x, y, g, accumulation=2, normalize="global_tokens")
    torch.testing.assert_close(acc["loss"], whole["loss"], rtol=1e-14, atol=0)
    torch.testing.assert_close(acc["dlogits"], whole["dlogits"], rtol=1e-14, atol=0)
    bug = golden.cross_entropy(x, y, g, accumulation=2, normalize="micro_batch")
    l1 = golden.cross_entropy(x[:4], y[:4], g, reduction="mean")["loss"]
    l2 = golden.cross_entropy(x[4:], y[4:], g, reduction="mean")["loss"]
    torch.testing.assert_close(bug["loss"], (l1 + l2) / 2, rtol=1e-14, atol=0)
    assert not torch.allclose(bug["loss"], whole["loss"])
