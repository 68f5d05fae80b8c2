"""The diagnosis of the frozen ports does not regress (issue 41 item 4): every port of
tests/data/ports/manifest.toml (ordinary implementations with one bug each, written from
the docs alone on branch `ports`) has its accepted causes in port_causes.toml, and each
port named right keeps naming an accepted cause on the failing ci cases of
port_guards.toml, item by item. The full run-level measurement is
`python scripts/ports_diagnosis.py` (docs/mutants.md#ports-written-apart-from-the-zoo)."""

import importlib
import tomllib
from functools import lru_cache
from pathlib import Path

import pytest
import torch

from bwd_suite.suite import registry
from bwd_suite.suite.cases import load_cases
from bwd_suite.suite.registry import Implementation
from bwd_suite.suite.roofline import Ceilings
from bwd_suite.suite.runner import CaseContext, RunOptions, run_item

HERE = Path(__file__).resolve().parent
MANIFEST = HERE.parent / "data" / "ports" / "manifest.toml"
CPU = torch.device("cpu")
CEIL = Ceilings(device_name="cpu", copy_gbps=None, copy_source="none", peak_tflops=None)
OPTS = RunOptions(device=CPU, golden_device=CPU, repeats=1, timing=False)

pytestmark = pytest.mark.skipif(not MANIFEST.exists(),
                                reason="the frozen ports (branch `ports`) are not here")


def _toml(path: Path) -> dict:
    with open(path, "rb") as f:
        return tomllib.load(f)


@pytest.fixture(scope="module")
def ports() -> dict:
    return {p["name"]: p for p in _toml(MANIFEST)["port"]}


def test_every_port_has_its_accepted_causes_and_they_are_causes_of_its_op(ports):
    accepted = _toml(HERE / "port_causes.toml")
    assert set(accepted) == set(ports)
    for name, want in accepted.items():
        table = {c.cause.value for c in registry.op(ports[name]["op"]).diagnosis.causes}
        causes = set(want["named"]) | set(want.get("added", ()))
        assert causes <= table, (name, causes - table)
        assert want["why"]


def _guarded():
    """(port, case id) of every guard case."""
    if not MANIFEST.exists():
        return []
    return [(name, case_id) for name, ids in _toml(HERE / "port_guards.toml").items()
            for case_id in ids]


@lru_cache(maxsize=None)
def _impl(op: str, obj: str) -> Implementation:
    """The port as `--impl OP=module:object` loads it (without the signature probe, which
    builds the op's default inputs: run_item checks the call anyway)."""
    module, _, name = obj.partition(":")
    fn = getattr(importlib.import_module(module), name)
    prepare = getattr(fn, "prepare", None)
    return Implementation(op=op, name=obj, fn=fn, kind="external", deterministic=False,
                          prepare=prepare if callable(prepare) else None)


@pytest.fixture(scope="module")
def cases(ports) -> dict:
    ops = {p["op"] for p in ports.values()}
    return {c.id: c for op in ops for c in load_cases(op=op, profile="ci")}


@pytest.mark.parametrize("name, case_id", _guarded())
def test_a_port_named_right_keeps_its_cause(name, case_id, ports, cases):
    port = ports[name]
    want = _toml(HERE / "port_causes.toml")[name]
    impl = _impl(port["op"], port["object"])
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        row = run_item(CaseContext(registry.op(port["op"]), cases[case_id], OPTS), impl,
                       None, CEIL, {})
    finally:
        torch.set_num_threads(before)
    assert row.verdict == "fail", (row.verdict, row.reason)
    assert row.diagnosis_cause in set(want["named"]) | set(want.get("added", ())), \
        row.diagnosis
