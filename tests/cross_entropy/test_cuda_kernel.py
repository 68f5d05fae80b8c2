"""Checks of our CUDA cross entropy that the case files cannot express: the launches of
each reduction (no host sync, count and sum on the device), bitwise reproducibility, and
dlogits written over the logits giving the same bits as into a separate tensor. GPU only;
the conformance itself runs as the cases' items with --impl cuda."""

import pytest
import torch

from bwd_suite.suite import registry
from bwd_suite.suite.launches import count_launches

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

SPEC = registry.op("cross_entropy")
DEV = torch.device("cuda")


def _inputs(**kw):
    p = dict(SPEC.params.defaults(), **kw)
    return p, SPEC.make_inputs(p, 11, DEV)


def _call(inputs, in_place=False):
    from bwd_suite.kernels.cross_entropy.cuda import cuda
    t = inputs.tensors
    attrs = {k: v for k, v in inputs.attrs.items() if k not in ("accumulation", "normalize")}
    logits = t["logits"].clone()
    out = SPEC.empty_outputs(inputs, {"reduction": attrs["reduction"]})
    if in_place:
        out["dlogits"] = logits
    cuda(logits=logits, targets=t["targets"], grad_loss=t["grad_loss"], out=out, **attrs)
    torch.cuda.synchronize()
    return out


@pytest.mark.parametrize("reduction, launches", [("mean", 3), ("sum", 2), ("none", 1)])
def test_launches_per_reduction(reduction, launches):
    _, inputs = _inputs(vocab=32000, seq=64, reduction=reduction)
    _call(inputs)  # built and warm
    n = count_launches(lambda: _call(inputs), DEV)
    assert n == launches


# 50257: the streaming kernel; 151936 over 640 rows: clusters of CTAs, in several waves
@pytest.mark.parametrize("vocab, seq", [(50257, 128), (151936, 320)])
def test_bitwise_over_repeats_with_every_feature(vocab, seq):
    _, inputs = _inputs(vocab=vocab, seq=seq, dtype="bfloat16", label_smoothing=0.1,
                        z_loss=1e-4, softcap=30.0, shift=True, mask="prompt")
    first = _call(inputs)
    for _ in range(5):
        again = _call(inputs)
        assert torch.equal(first["loss"], again["loss"])
        assert torch.equal(first["dlogits"].view(torch.int16), again["dlogits"].view(torch.int16))


@pytest.mark.parametrize("seq", [32, 320])  # 320: 640 rows, more clusters than fit at once
def test_in_place_gives_the_same_bits(seq):
    _, inputs = _inputs(vocab=128256, seq=seq, dtype="bfloat16")
    apart, over = _call(inputs), _call(inputs, in_place=True)
    assert torch.equal(apart["loss"], over["loss"])
    assert torch.equal(apart["dlogits"].view(torch.int16), over["dlogits"].view(torch.int16))
