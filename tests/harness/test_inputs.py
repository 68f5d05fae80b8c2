"""Inputs keep the memory layout under test on every device, and are seeded."""

import pytest
import torch

from suite import registry

SPEC = registry.op("causal_conv1d")
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _inputs(device, **kw):
    p = dict(SPEC.params.defaults(), **kw)
    return SPEC.make_inputs(p, 7, torch.device(device)).tensors


@pytest.mark.parametrize("device", DEVICES)
def test_layouts_survive_the_move_to_the_device(device):
    t = _inputs(device, x_sliced=True, dout_layout="expanded", final_states=True,
                dfinal_layout="expanded", initial_states=True)
    x = t["x"]
    assert x.stride(1) == 1 and not x.is_contiguous()  # channel-last slice of a wider buffer
    assert x.stride(2) > x.shape[1]
    assert t["dout"].stride(2) == 0 and t["dfinal_states"].stride(2) == 0
    assert t["initial_states"].stride(1) == 1
    cf = _inputs(device, layout="channel_first", dout_layout="sliced")
    assert cf["x"].stride(2) == 1 and cf["x"].is_contiguous()
    assert cf["dout"].stride(2) == 1 and not cf["dout"].is_contiguous()
    other = _inputs(device, layout="channel_first", dout_layout="other")
    assert other["dout"].stride(1) == 1


@pytest.mark.parametrize("device", DEVICES)
def test_same_seed_same_values_on_every_device(device):
    a = _inputs("cpu", seq_idx="random")
    b = _inputs(device, seq_idx="random")
    for k, v in a.items():
        if v is not None:
            assert torch.equal(v, b[k].cpu()), k
    assert a["x"].abs().min() > 0 or a["x"].count_nonzero() > 0.99 * a["x"].numel()
