"""The checked hypotheses keep every tensor on the inputs' device. On a GPU the diagnosis
builds its references beside the outputs, and one index made on the CPU broke every
attention diagnosis there; the meta device refuses a CPU operand as CUDA does, so these
run on the CPU. Ops whose golden reads a value back (.item(), which meta cannot) are
named with the reason."""

import pytest
import torch

from bwd_suite.suite import registry

registry.discover()
# op -> why its references cannot run on the meta device
READS_VALUES = {
    "adamw": "its golden reads back whether every gradient is finite (the skipped step)",
    "cross_entropy": "its golden reads the count of scored labels back (the mean's divisor)",
}


def _meta(v):
    if isinstance(v, torch.Tensor):
        return (v.double() if v.is_floating_point() else v).to("meta")
    if isinstance(v, (list, tuple)):
        return type(v)(_meta(x) for x in v)
    return v


def _on_meta(found) -> bool:
    if isinstance(found, torch.Tensor):
        return found.device.type == "meta"
    if isinstance(found, dict):
        return all(_on_meta(v) for v in found.values())
    if isinstance(found, (list, tuple)):
        return all(_on_meta(v) for v in found)
    return True


@pytest.mark.parametrize("name", sorted(registry.ops()))
def test_the_hypotheses_references_stay_on_the_inputs_device(name):
    spec = registry.op(name)
    h = getattr(spec.diagnosis, "hypotheses", None) if spec.diagnosis else None
    if h is None:
        pytest.skip(f"{name} declares no checked hypotheses")
    if name in READS_VALUES:
        pytest.skip(READS_VALUES[name])
    p = dict(spec.params.defaults())
    inp = spec.make_inputs(p, 3, torch.device("cpu"))
    t = {k: _meta(v) for k, v in inp.tensors.items()}
    assert _on_meta(h.golden_terms(p, t, inp.attrs))
    if h.perturbed is not None:
        assert _on_meta(h.perturbed(p, t, inp.attrs, spec.golden(**t, **inp.attrs)))
