"""The linear mutant zoo (kernels/mutants/linear.py) and its diagnosis
(ops/linear_diagnosis.py): the model without a bug passes every ci case; each bug changes
what it should and nothing else where that is cheap to state; on the ci profile every
mutant is caught and the cross-case diagnosis names its planted cause."""

from __future__ import annotations

import pytest
import torch

from bwd_suite.kernels.mutants import linear as zoo
from bwd_suite.suite import registry
from bwd_suite.suite.cases import load_cases
from bwd_suite.suite.commands.mutants import run_zoo
from bwd_suite.suite.inputs import is_poison, poison_
from bwd_suite.suite.registry import Implementation
from tests.golden_support import one_thread  # noqa: F401 - fixture

SPEC = registry.op("linear")
CPU = torch.device("cpu")
Bug = zoo.Bug


def call(bugs=(), **kw):
    p = dict(SPEC.params.defaults(), m=9, n=12, k=5, dtype="float32")
    p.update(kw)
    inp = SPEC.make_inputs(p, 4, CPU)
    out = {k: poison_(v) for k, v in SPEC.empty_outputs(inp, p).items()}
    zoo.backward_model(**inp.tensors, **inp.attrs, out=out, bugs=frozenset(bugs))
    return out


def test_the_model_without_a_bug_passes_every_ci_case():
    impl = Implementation(op="linear", name="clean_model", fn=zoo.clean, kind="mutant")
    report = run_zoo([impl], profile="ci", device="cpu")
    (res,) = report.results
    assert res.n_items == len(load_cases(op="linear", profile="ci"))
    assert res.n_failed == 0, res.diagnosis.text


@pytest.mark.parametrize("w_t", [False, True])
def test_the_transposed_store_writes_dwT_in_dws_own_order(w_t):
    clean, bad = call(w_t=w_t), call({Bug.DW_TRANSPOSED}, w_t=w_t)
    assert torch.equal(bad["dx"], clean["dx"]) and torch.equal(bad["db"], clean["db"])
    # dw's memory, in order, holds dWᵀ laid out as dw is: the other matrix's order
    if w_t:  # column-major dw: its memory is dWᵀ row by row; the bug left dW row by row
        assert torch.equal(bad["dw"].t().reshape(-1), clean["dw"].reshape(-1))
    else:
        assert torch.equal(bad["dw"].reshape(-1), clean["dw"].t().reshape(-1))


def test_the_derivative_at_the_output_is_relus_own():
    for act, same in (("relu", True), ("gelu", False), ("silu", False)):
        clean = call(activation=act)
        bad = call({Bug.DERIVATIVE_AT_OUTPUT}, activation=act)
        assert torch.equal(bad["dx"], clean["dx"]) == same, act


def test_db_unwritten_only_off_the_alignment():
    assert bool(is_poison(call({Bug.DB_UNWRITTEN}, n=12)["db"]).all())
    assert torch.equal(call({Bug.DB_UNWRITTEN}, n=16)["db"], call(n=16)["db"])


def test_every_mutant_is_caught_and_named_on_ci():
    mutants = [i for i in registry.implementations("linear") if i.kind == "mutant"]
    assert len(mutants) == len(zoo.ALL) >= 6
    report = run_zoo(mutants, profile="ci", device="cpu")
    for r in report.results:
        assert r.caught, r.name
        assert r.correct, (r.name, r.planted, r.diagnosis.cause, r.diagnosis.text)
