"""The ci profile catches every port of tests/data/ports (issue 41 items 3 and 4): bugs
written from the docs alone, apart from the mutant zoo. Each port runs on the smallest ci
case that catches it (tests/data/ports/catching.toml, from `scripts/ports_ci.py
--smallest`) and must fail it; each op's correct reference port must pass every case
selected for that op, so a failure is the port's bug, not the case."""

import tomllib

import pytest
import torch

from bwd_suite.suite import registry
from bwd_suite.suite.cases import load_cases
from bwd_suite.suite.driver import Driver
from bwd_suite.suite.outcomes import Verdict
from bwd_suite.suite.plan import Plan
from bwd_suite.suite.runner import RunOptions
from tests.data.ports import manifest

CPU = torch.device("cpu")
OPTS = RunOptions(device=CPU, golden_device=CPU, repeats=1, timing=False)
PORTS = manifest.ports()
OPS = sorted({p["op"] for p in PORTS})
with open(manifest.MANIFEST.with_name("catching.toml"), "rb") as f:
    CATCHING = tomllib.load(f)


def _ci_cases(op):
    return {c.id: c for c in load_cases(op=op, profile="ci")}


def test_the_manifest_holds_enough_ports_of_every_kind():
    assert set(OPS) == set(registry.ops())  # an op added later needs its ports
    for op in OPS:
        assert sum(p["op"] == op for p in PORTS) >= 5, op
    assert sum(p["every_case"] for p in PORTS) >= 2
    assert {p["kind"] for p in PORTS} == {"formula", "indexing", "precision", "edge", "state"}
    names = [p["name"] for p in PORTS]
    assert len(names) == len(set(names))
    for p in PORTS:
        assert p["cause"] and p["condition"] and p["outputs"], p["name"]
        failed, ran = map(int, p["ci"].split("/"))
        assert 0 < failed <= ran, p["name"]  # every port was caught by ci when frozen


def test_every_port_has_a_catching_case_of_the_ci_profile():
    assert set(CATCHING) == {p["name"] for p in PORTS}
    for op in OPS:
        ids = _ci_cases(op)
        for p in manifest.ports(op):
            assert CATCHING[p["name"]] in ids, (p["name"], CATCHING[p["name"]])


@pytest.mark.parametrize("op", OPS)
def test_ci_cases_catch_every_port_and_pass_the_reference(op):
    torch.set_num_threads(1)
    spec = registry.op(op)
    cases = _ci_cases(op)
    driver = Driver(OPTS)
    ports = manifest.ports(op)
    for p in ports:
        (row,) = driver.rows(Plan.single(spec, cases[CATCHING[p["name"]]],
                                         manifest.implementation(p)))
        assert row.verdict in (Verdict.FAIL, Verdict.ERROR), (p["name"], row.case_id,
                                                              row.reason)
    reference = manifest.reference(op)
    for cid in sorted({CATCHING[p["name"]] for p in ports}):
        (row,) = driver.rows(Plan.single(spec, cases[cid], reference))
        assert row.verdict is Verdict.PASS, (cid, row.reason)
