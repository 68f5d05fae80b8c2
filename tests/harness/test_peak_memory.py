"""peak_mem_bytes is the implementation's own temporaries: the outputs, the inputs and the
copies the harness hands out are not counted, an fp32 upcast of the logits is. GPU only
(the CUDA caching allocator's statistics)."""

from types import MappingProxyType

import pytest
import torch

from bwd_suite.suite import registry
from bwd_suite.suite.cases import Case
from bwd_suite.suite.registry import Implementation
from bwd_suite.suite.roofline import Ceilings
from bwd_suite.suite.runner import CaseContext, RunOptions, run_item

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

SPEC = registry.op("cross_entropy")
DEV = torch.device("cuda")
CEIL = Ceilings(device_name="gpu", copy_gbps=None, copy_source="none", peak_tflops=None)
N, V = 64, 32000


def _row(fn):
    p = dict(SPEC.params.defaults(), batch=1, seq=N, vocab=V, dtype="bfloat16")
    case = Case(op="cross_entropy", group="t", id="cross_entropy/t/x", tags=frozenset({"gpu"}),
                params=MappingProxyType(p), seed=1, file="<test>")
    opts = RunOptions(device=DEV, golden_device=DEV, repeats=1, timing=False)
    return run_item(CaseContext(SPEC, case, opts),
                    Implementation(op="cross_entropy", name="t", fn=fn, kind="external"),
                    None, CEIL, {})


def test_an_fp32_upcast_counts_and_the_outputs_do_not():
    upcast = registry.select_implementations("cross_entropy", ["torch_fp32"])[0].fn

    def writes_zeros(*, out, **kw):
        out["loss"].zero_()
        out["dlogits"].zero_()

    heavy, light = _row(upcast), _row(writes_zeros)
    assert heavy.peak_mem_bytes >= N * V * 4  # the fp32 logits at least
    assert light.peak_mem_bytes < N * V  # nothing logits-sized (dlogits is N V 2 bytes)
