"""Checks of our CUDA causal conv1d backward that the case files cannot express: bitwise
reproducibility over many repeats, and 64-bit offsets past 2^32 elements. GPU only; the
conformance itself runs as the cases' pytest items with --suite-impl cuda."""

import pytest
import torch

from bwd_suite.suite import registry
from bwd_suite.suite.inputs import poison_

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

SPEC = registry.op("causal_conv1d")


def _impl():
    return registry.select_implementations("causal_conv1d", ["cuda"])[0]


def _call(inputs, params):
    return SPEC.call(_impl().fn, inputs, params,
                     lambda e, inputs=None: {k: poison_(v) for k, v in e.items()})


@pytest.mark.parametrize("layout", ["channel_first", "channel_last"])
def test_dweight_dbias_bitwise_over_20_repeats(layout):
    p = dict(SPEC.params.defaults(), batch=4, dim=1024, seqlen=2048, layout=layout)
    inputs = SPEC.make_inputs(p, 11, torch.device("cuda"))
    first = _call(inputs, p)
    for _ in range(19):
        again = _call(inputs, p)
        for name in ("dweight", "dbias", "dx"):
            assert torch.equal(first[name].view(torch.int32 if first[name].dtype == torch.float32
                                                else torch.int16),
                               again[name].view(torch.int32 if again[name].dtype == torch.float32
                                                else torch.int16)), name


@pytest.mark.parametrize("layout", ["channel_first", "channel_last"])
def test_offsets_past_2_pow_32_elements(layout):
    """x, dout and dx of 2^32 + 2^20 bf16 elements (8 GiB each): the last batch's dx must
    equal, bit for bit, the dx of a run on that batch alone (where offsets are small)."""
    free, _ = torch.cuda.mem_get_info()
    if free < 48 * 2**30:
        pytest.skip(f"needs 48 GiB of free GPU memory, {free / 2**30:.0f} GiB free")
    B, D, L = 2, 4096, 2**19 + 128  # B*D*L = 2^32 + 2^20
    p = dict(SPEC.params.defaults(), batch=B, dim=D, seqlen=L, layout=layout,
             dtype="bfloat16", bias=True)
    inputs = SPEC.make_inputs(dict(p, batch=1, seqlen=1), 3, torch.device("cuda"))
    order = (0, 1, 2) if layout == "channel_first" else (0, 2, 1)
    shape = (B, D, L)
    phys = [shape[d] for d in order]
    inv = [order.index(d) for d in range(3)]
    x = torch.randn(phys, device="cuda", dtype=torch.bfloat16).permute(inv)
    dout = torch.randn(phys, device="cuda", dtype=torch.bfloat16).permute(inv)
    t = dict(inputs.tensors, x=x, dout=dout)
    big = SPEC.empty_outputs(type(inputs)(t, inputs.attrs), p)
    _impl().fn(**t, **inputs.attrs, out=big)
    last = dict(t, x=x[-1:], dout=dout[-1:])
    small = SPEC.empty_outputs(type(inputs)(last, inputs.attrs), dict(p, batch=1))
    _impl().fn(**last, **inputs.attrs, out=small)
    torch.cuda.synchronize()
    assert torch.equal(big["dx"][-1:].view(torch.int16), small["dx"].view(torch.int16))
