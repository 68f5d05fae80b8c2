"""What an implementation reports about its item (suite/facts.py) reaches the row's
impl_facts_json: from the untimed prepare and the first checked call, nothing from calls
outside a collection, null when nothing was reported; and the report's details show it."""

from __future__ import annotations

import json
from types import MappingProxyType

import torch

from bwd_suite.suite import facts, registry
from bwd_suite.suite.cases import Case
from bwd_suite.suite.registry import Implementation
from bwd_suite.suite.roofline import Ceilings
from bwd_suite.suite.runner import CaseContext, RunOptions, run_item

CPU = torch.device("cpu")
CEIL = Ceilings(device_name="cpu", copy_gbps=None, copy_source="none", peak_tflops=None)
OPTS = RunOptions(device=CPU, golden_device=CPU, repeats=2, timing=False)


def _row(impl):
    spec = registry.op("softmax")
    p = dict(spec.params.defaults(), rows=4, length=8, dtype="float32")
    case = Case(op="softmax", group="t", id="softmax/t/x", tags=frozenset({"ci"}),
                params=MappingProxyType(p), seed=1, file="<test>")
    return run_item(CaseContext(spec, case, OPTS), impl, None, CEIL, {})


def _reference(y, dy, out):
    out["dx"].copy_(y * (dy - (dy * y).sum(-1, keepdim=True)))


def test_facts_of_the_first_call_and_of_prepare_reach_the_row():
    calls = []

    def prepare(*, y, dy, mask, scale):
        facts.report(aux="bitmask", ld=128)
        return None

    def fn(*, y, dy, mask, scale, saved):
        calls.append(1)
        facts.report(algo=len(calls), epilogue="DGELU", fused=True)
        out = {"dx": torch.empty_like(y)}
        _reference(y, dy, out)
        return out

    row = _row(Implementation(op="softmax", name="t", fn=fn, prepare=prepare))
    assert row.verdict == "pass", row.reason
    assert len(calls) == 2  # the determinism repeat reports outside the collection
    assert json.loads(row.impl_facts_json) == {"aux": "bitmask", "ld": 128, "algo": 1,
                                               "epilogue": "DGELU", "fused": True}


def test_nothing_reported_is_null_and_report_outside_a_collection_is_silent():
    def fn(*, y, dy, mask, scale, out):
        _reference(y, dy, out)

    assert _row(Implementation(op="softmax", name="t", fn=fn)).impl_facts_json is None
    facts.report(anything=1)  # no collection: nothing kept, nothing raised
    with facts.collecting() as outer:
        with facts.collecting() as inner:
            facts.report(shape=(2, 3))
        assert inner == {"shape": "(2, 3)"} and outer == inner
