"""The memory ledger and the stage profile of a training step on the CPU: MemTracker's split
of what the CPU gives against the analytic model of each class (exact: the blocks' saved
tensors, bytes per parameter), checkpointing moving the saved activations and adding the
recomputed forward's FLOPs to the backward exactly; the rows carry both."""

import json

import pytest
import torch

from bwd_suite.reports import render
from bwd_suite.suite import results
from bwd_suite.suite.inputs import DTYPES
from bwd_suite.suite.outcomes import Verdict
from bwd_suite.suite.step import ledger, measure, runner, scenario, stages
from bwd_suite.suite.step.loop import PLAIN, Run, Variant

SCENARIOS = {s.name: s for s in scenario.load(profile="ci")}


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def make(name: str, variant=PLAIN) -> Run:
    s = SCENARIOS[name]
    spec = s.spec
    return Run(spec, s.params, runner.choice_set(s, None).backends_for("cpu"),
               DTYPES[s.params["dtype"]], "cpu", spec.init(s.params, s.seed),
               spec.training.batch(s.params, s.seed, torch.device("cpu")), variant, s.seed)


@pytest.mark.parametrize("name, checkpoint", [
    ("mamba-tiny-fp32", ()), ("mamba-tiny-fp32", ("block",)), ("mamba-tiny-bf16", ("mixer",)),
    ("transformer-tiny-bf16", ()), ("transformer-tiny-bf16", ("attention", "mlp")),
    ("mamba-tiny-dropout", ()),
])
def test_the_measured_classes_equal_the_model(name, checkpoint):
    run = make(name, Variant("v", checkpoint=frozenset(checkpoint)))
    got = ledger.measure(run, 1, "cpu")
    m, a = got["measured"], got["analytic"]
    assert got["tool"] == "MemTracker" and m["workspace"] is None  # no allocator on a CPU
    # what the graph keeps as the backward starts: the blocks' saved tensors, exactly
    assert got["saved_after_forward"] == a["saved_activations"]
    assert m["parameters"] == a["parameters"] and m["optimizer_state"] == a["optimizer_state"]
    if run.dtype == torch.bfloat16:  # fp32 main gradients, alive the whole step
        assert m["gradients"] >= a["gradients"]
    assert got["batch_bytes"] == 2 * run.tokens.numel() * 8


def test_checkpointing_moves_the_saved_activations():
    plain = ledger.measure(make("transformer-tiny-bf16"), 1, "cpu")
    block = ledger.measure(make("transformer-tiny-bf16",
                                Variant("c", checkpoint=frozenset({"block"}))), 1, "cpu")
    assert block["saved_after_forward"] < plain["saved_after_forward"] / 4
    # the persistent classes do not move
    for k in ("parameters", "optimizer_state"):
        assert block["measured"][k] == plain["measured"][k]


def test_full_checkpointing_adds_the_forward_flops_to_the_backward_exactly():
    s = SCENARIOS["mamba-tiny-fp32"]
    plain = stages.measure(make(s.name).step, "cpu", timed_steps=1)
    ckpt = stages.measure(make(s.name, Variant("c", checkpoint=frozenset({"block"}))).step,
                          "cpu", timed_steps=1)
    for st in (plain, ckpt):
        assert set(st["stages"]) == set(stages.STAGES)
        assert st["stages"]["forward"]["flops"] > 0 and st["stages"]["loss"]["flops"] == 0
        assert all(v["time_ms"] > 0 and v["launches"] is None for v in st["stages"].values())
    again = measure.recompute(plain, ckpt, s)
    assert again["exact"] and again["recomputed_flops"] > 0
    assert ckpt["stages"]["backward"]["flops"] > plain["stages"]["backward"]["flops"]
    # every linear of the blocks: 2 N K M FLOPs forward (the head's is not recomputed)
    p = s.params
    N, D, E = p["batch"] * p["seq"], p["dim"], p["expand"] * p["dim"]
    conv = 2 * N * E * p["width"]  # FlopCounterMode's depthwise conv1d count
    assert again["recomputed_flops"] == p["layers"] * (2 * N * D * 2 * E + 2 * N * E * D + conv)


def test_a_recomputation_that_counts_wrong_fails_the_checkpoint_row():
    s = SCENARIOS["mamba-tiny-fp32"]
    cs = runner.choice_set(s, None)
    outcome = runner.check_steps(s, cs, "cpu")["checkpoint"]
    measured = {"stages": {"stages": {k: {"time_ms": 1.0, "flops": 10, "launches": None}
                                      for k in stages.STAGES},
                           "timing": "perf_counter", "timed_steps": 1,
                           "recompute": {"recomputed_flops": 5, "expected_backward_flops": 15,
                                         "backward_flops": 10, "exact": False}},
                "ledger": {"error": "not measured"}}
    r = runner.row(s, cs, "checkpoint", outcome, None, 0.0, measured)
    assert r.verdict is Verdict.FAIL and "not the plain backward's plus" in r.reason


def test_the_measured_rows_carry_stages_and_ledger_and_the_report_draws_them(tmp_path):
    s = SCENARIOS["transformer-tiny-fp32"]
    got = runner.run_scenario(s, runner.choice_set(s, None), "cpu", timed_steps=1)
    rows = {r.case_id.rsplit("/", 1)[-1]: r for r in got}
    for check in ("float64", "checkpoint", "offload"):
        r = rows[check]
        st, led = json.loads(r.stages_json), json.loads(r.ledger_json)
        assert set(st["stages"]) == set(stages.STAGES) and st["timing"] == "perf_counter"
        assert set(led["measured"]) == set(ledger.CLASSES)
        assert r.flops == sum(v["flops"] for v in st["stages"].values())
        assert r.saved_bytes == led["saved_after_forward"] and r.time_median_s > 0
    assert json.loads(rows["checkpoint"].stages_json)["recompute"]["exact"]
    assert rows["loss"].stages_json is None and rows["loss"].ledger_json is None

    # the results file reads back, and the page's section draws a bar per measured step
    path = tmp_path / "r.parquet"
    with results.ResultsWriter(path) as writer:
        for r in got:
            writer.add(r)
    report = render.build(results.read_results([path]))
    (section,) = report.steps
    assert section.name == "transformer-tiny-fp32" and len(section.stage_rows) == 3
    assert [b.label for b in section.chart.rows] == ["eager plain", "eager checkpointed",
                                                      "eager offloaded"]
    assert {c.name for c in section.ledger_rows[0].classes} == set(ledger.CLASSES)
    html = render.render(report)
    body = html[html.index('<section id="steps">'):]
    assert body.count("<svg class=\"chart stacked\"") == 1
    assert "accumulation_mean" in body and "(declared)" in body


@pytest.mark.parametrize("where, stage", [("loss", "loss"), ("backward", "backward"),
                                          ("optimizer", "optimizer"), ("between", None),
                                          ("after", None)])
def test_the_ledger_names_the_stage_that_made_the_peak(where, stage):
    run = make("mamba-tiny-fp32")
    keep = []

    def big():
        t = torch.ones(1 << 20)
        del t

    def step(t, marks):  # a large temporary made and dropped in one stage (or between two,
        for name in ("forward", "loss", "backward", "optimizer"):  # or after the last),
            if where == "between" and name == "backward":  # small ones in every stage
                big()
            with marks(name):
                keep.append(torch.ones(1 << 10))
                if name == where:
                    big()
        if where == "after":
            big()
    got = ledger.measure(run, 1, "cpu", step=step)
    assert got["peak_stage"] == stage
    assert got["tracked_peak"] >= 4 << 20


def test_a_real_step_names_one_of_its_stages():
    got = ledger.measure(make("transformer-tiny-bf16"), 1, "cpu")
    assert got["peak_stage"] in ("forward", "loss", "backward", "optimizer")
