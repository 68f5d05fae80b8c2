"""Failure diagnosis: localisation and term fits on synthetic error patterns planted into
a correct implementation's outputs, the cross-case weighing, the schema-2 columns and the
upgrade of version-1 results files, and the diagnosis in the CLI summary."""

import enum
from pathlib import Path
from types import MappingProxyType

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from bwd_suite.golden import causal_conv1d as golden
from bwd_suite.kernels.causal_conv1d.tiled import backward_tiled
from bwd_suite.kernels.causal_conv1d.torch_ref import torch_ref
from bwd_suite.suite import diagnosis as dg
from bwd_suite.suite import registry, results, summary
from bwd_suite.suite.cases import Case
from bwd_suite.suite.errors import SuiteInputError
from bwd_suite.suite.registry import Implementation
from bwd_suite.suite.roofline import Ceilings
from bwd_suite.suite.rows import ResultRow
from bwd_suite.suite.runner import CaseContext, RunOptions, run_item

SPEC = registry.op("causal_conv1d")
CPU = torch.device("cpu")
CEIL = Ceilings(device_name="cpu", copy_gbps=None, copy_source="none", peak_tflops=None)
OPTS = RunOptions(device=CPU, golden_device=CPU, repeats=1, timing=False)
ROOT = Path(__file__).resolve().parents[2]


def case(**params) -> Case:
    p = {**SPEC.params.defaults(), "dim": 16, "dtype": "float32", **params}
    return Case(op="causal_conv1d", group="diag", id="causal_conv1d/diag/x",
                tags=frozenset({"ci"}), params=MappingProxyType(p), seed=77, file="<test>")


def planted(perturb, **params) -> dict:
    """Run the correct tiled model, then `perturb(out, ctx)` its outputs in place."""
    ctx = CaseContext(SPEC, case(**params), OPTS)

    def fn(out, **kw):
        backward_tiled(out=out, **kw)
        perturb(out, ctx)

    impl = Implementation(op="causal_conv1d", name="planted", fn=fn, kind="external")
    return run_item(ctx, impl, None, CEIL, {})


def contribution(ctx, time_mask) -> dict:
    """The golden gradients of the outputs where `time_mask` is true (golden is linear
    in dout), without dfinal_states."""
    t = ctx.float64_inputs()
    return golden.backward(t["x"], t["weight"], t["dout"] * time_mask, bias=t["bias"],
                           seq_idx=t["seq_idx"], initial_states=t["initial_states"],
                           activation=ctx.inputs.attrs["activation"])


def tile_tails(L, T=64, H=3):
    p = torch.arange(L)
    return (p % T >= T - H) & (p < L // T * T)


def halo_outputs(L, T=64, H=3):
    p = torch.arange(L)
    return (p >= T) & (p % T < H)


def location(row, output, region):
    return next((lo for lo in row.error_locations
                 if lo["output"] == output and lo["region"] == region), None)


# ---------------------------------------------------------------- synthetic patterns

def test_noise_in_the_last_steps_of_each_tile_without_silu_is_the_right_halo():
    def perturb(out, ctx):
        out["dx"][..., tile_tails(200)] += 1.0

    row = planted(perturb, seqlen=200, activation="none")
    assert row.verdict == "fail"
    assert row.diagnosis_cause == "right_halo", row.diagnosis
    lo = location(row, "dx", "tile_tail_64")
    assert lo["share"] == 1.0 and lo["density"] == 1.0
    assert "in the last 3 steps of each 64-step tile" in row.diagnosis
    assert location(row, "dx", "seq_tail") is None  # the sequence end is right


def test_the_same_noise_with_silu_points_at_the_recompute_not_the_halo_load():
    def perturb(out, ctx):
        out["dx"][..., tile_tails(200)] += 1.0

    row = planted(perturb, seqlen=200, activation="silu")
    assert row.diagnosis_cause == "silu_recompute_halo", row.diagnosis
    fit = next(t for t in row.error_terms if t["term"] == "tile_halo_64")
    assert fit["residual"] > 0.5  # a constant is not the halo's contribution


def test_minus_the_halo_contribution_is_the_right_halo_even_with_silu():
    def perturb(out, ctx):
        part = contribution(ctx, halo_outputs(200))["dx"] * tile_tails(200)
        out["dx"] -= part.float()

    row = planted(perturb, seqlen=200, activation="silu")
    assert row.diagnosis_cause == "right_halo", row.diagnosis
    fit = next(t for t in row.error_terms if t["term"] == "tile_halo_64")
    assert fit["coef"] == pytest.approx(-1, abs=1e-3) and fit["residual"] < 1e-3
    assert "error = -1.00 x the gradients right of each 64-step tile" in row.diagnosis


def test_128_step_tiles_are_told_from_64_step_ones():
    def perturb(out, ctx):
        part = contribution(ctx, halo_outputs(300, T=128))["dx"] * tile_tails(300, T=128)
        out["dx"] -= part.float()

    row = planted(perturb, seqlen=300, activation="silu")
    assert row.diagnosis_cause == "right_halo"
    assert "each 128-step tile" in row.diagnosis


def test_errors_where_a_packed_boundary_meets_a_tile_edge_are_not_a_halo_bug():
    # boundaries at 64 and 128: the golden halo contributes nothing across them, so a
    # missing halo cannot explain errors there, a mask that crosses the boundary can
    def perturb(out, ctx):
        out["dx"][..., tile_tails(200)] += 1.0

    row = planted(perturb, seqlen=200, seq_idx="tile_edges", activation="silu")
    assert row.diagnosis_cause == "packed_mask", row.diagnosis
    assert "right_halo" not in row.diagnosis and "halo" not in row.diagnosis_cause


def test_dx_short_of_dfinal_in_the_last_steps_is_the_missing_copy_path():
    def perturb(out, ctx):
        out["dx"][..., -3:] -= ctx.inputs.tensors["dfinal_states"]

    row = planted(perturb, seqlen=40, initial_states=True, final_states=True)
    assert row.diagnosis_cause == "dfinal_path_missing", row.diagnosis
    assert location(row, "dx", "seq_tail")["share"] == 1.0


def test_a_scaled_dfinal_is_not_the_missing_path():
    def perturb(out, ctx):
        w = ctx.inputs.tensors["weight"][:, -1:]
        out["dx"][..., -3:] += (w - 1) * ctx.inputs.tensors["dfinal_states"]

    row = planted(perturb, seqlen=40, initial_states=True, final_states=True)
    assert row.diagnosis_cause == "dfinal_path_scaled", row.diagnosis


def test_wrong_tail_without_a_state_gradient_is_out_of_range_gradients():
    def perturb(out, ctx):
        out["dx"][..., -3:] += 0.5

    row = planted(perturb, seqlen=40)
    assert row.diagnosis_cause == "out_of_range_gradients", row.diagnosis
    assert not any(t["term"] == "state_path" for t in row.error_terms)


def test_when_every_step_is_in_the_state_window_location_names_no_cause():
    # L = 2 < K-1: "the last K-1 steps" is the whole sequence, so it says nothing
    def perturb(out, ctx):
        out["dx"] += 0.5

    row = planted(perturb, seqlen=2)
    assert row.verdict == "fail" and row.diagnosis_cause is None, row.diagnosis
    assert location(row, "dx", "seq_tail")["coverage"] == 1.0


def test_dweight_plus_the_halo_contribution_is_the_halo_counted_twice():
    def perturb(out, ctx):
        out["dweight"] += contribution(ctx, halo_outputs(200))["dweight"].float()

    row = planted(perturb, seqlen=200)
    assert row.diagnosis_cause == "halo_in_dweight", row.diagnosis
    assert {o["name"] for o in row.outputs if o["err"] > o["allowed"]} == {"dweight"}


def test_dweight_without_the_later_batches_is_the_batch_reduction():
    def perturb(out, ctx):
        later = (torch.arange(3) > 0).view(3, 1, 1)
        out["dweight"] -= contribution(ctx, later)["dweight"].float()

    row = planted(perturb, seqlen=40, batch=3)
    assert row.diagnosis_cause == "batch_reduction", row.diagnosis


def test_errors_everywhere_name_silu_only_when_silu_is_on():
    def perturb(out, ctx):
        out["dx"] *= 1.01

    with_silu = planted(perturb, seqlen=100, activation="silu")
    assert with_silu.diagnosis_cause in ("silu_recompute_bias", "silu_derivative")
    assert "SiLU" in with_silu.diagnosis
    without = planted(perturb, seqlen=100, activation="none")
    assert without.verdict == "fail" and without.diagnosis_cause is None
    assert without.diagnosis.startswith("unclassified: dx wrong at")


def test_dweight_wrong_in_the_partial_channel_vector_is_the_channel_tail():
    def perturb(out, ctx):
        out["dweight"][8:] = 0

    row = planted(perturb, seqlen=40, dim=13)
    assert row.diagnosis_cause == "channel_tail", row.diagnosis
    assert location(row, "dweight", "channel_tail_8")["coverage"] == pytest.approx(5 / 13)


def test_gradient_at_padding_positions_is_padding_not_masked():
    def perturb(out, ctx):
        pad = (ctx.inputs.tensors["seq_idx"] < 0).unsqueeze(1)
        out["dx"] += pad * 0.5
        out["dbias"] += 1.0

    row = planted(perturb, seqlen=100, seq_idx="padding_mid")
    assert row.diagnosis_cause == "padding_not_masked", row.diagnosis
    assert location(row, "dx", "padding")["share"] == 1.0


def test_a_passing_item_has_no_diagnosis():
    row = planted(lambda out, ctx: None, seqlen=40)
    assert row.verdict == "pass"
    assert row.diagnosis is None and row.diagnosis_cause is None
    assert row.error_locations == [] and row.error_terms == []


def test_a_broken_diagnosis_hook_never_loses_the_verdict():
    def boom(*a, **k):
        raise RuntimeError("hook bug")

    from dataclasses import replace
    spec = replace(SPEC, diagnosis=replace(SPEC.diagnosis, regions=boom))
    ctx = CaseContext(spec, case(seqlen=40), OPTS)

    def fn(out, **kw):
        backward_tiled(out=out, **kw)
        out["dx"] += 1

    row = run_item(ctx, Implementation(op="causal_conv1d", name="p", fn=fn, kind="external"),
                   None, CEIL, {})
    assert row.verdict == "fail" and row.failure_kind == "mismatch"
    assert row.diagnosis == "diagnosis failed: RuntimeError: hook bug"


# ---------------------------------------------------------------- the machinery

def test_locate_counts_share_density_and_coverage():
    bad = torch.zeros(2, 10, dtype=torch.bool)
    bad[:, 8:] = True  # 4 wrong elements
    bad[0, 0] = True  # and one elsewhere
    tail = dg.Region("tail", "", torch.arange(10) >= 8)
    first = dg.Region("first", "", torch.arange(2).view(2, 1) == 0)
    none = dg.Region("none", "", torch.arange(10) == 5)
    locs = {lo.region: lo for lo in dg.locate("o", bad, [tail, first, none])}
    assert set(locs) == {"tail", "first"}  # regions without wrong elements are left out
    assert (locs["tail"].n_bad, locs["tail"].n_region) == (4, 4)
    assert locs["tail"].share == pytest.approx(0.8) and locs["tail"].density == 1.0
    assert locs["tail"].coverage == pytest.approx(0.2)
    assert locs["first"].share == pytest.approx(0.6) and locs["first"].coverage == 0.5


def test_fit_term_recovers_the_coefficient_and_the_unexplained_rest():
    g = torch.Generator().manual_seed(0)
    term = torch.randn(1000, generator=g, dtype=torch.float64)
    exact = dg.fit_term("o", -term, dg.Term("t", "", term))
    assert exact.coef == pytest.approx(-1) and exact.residual == pytest.approx(0, abs=1e-12)
    other = torch.randn(1000, generator=g, dtype=torch.float64)
    mixed = dg.fit_term("o", 0.5 * term + other, dg.Term("t", "", term))
    assert mixed.coef == pytest.approx(0.5, abs=0.1) and 0.8 < mixed.residual < 0.95
    assert dg.fit_term("o", other, dg.Term("t", "", torch.zeros(1000))) is None


def _ev(locations=(), fits=(), wrong=("dx",), **features):
    return dg.Evidence(frozenset(wrong), tuple(locations), tuple(fits), features)


def test_where_takes_the_smallest_region_holding_the_errors_and_spread_the_rest():
    big = dg.Location("dx", "vec_tail_8", 10, 30, 1.0, 0.3, 0.375)
    small = dg.Location("dx", "tile_tail_64", 10, 10, 1.0, 1.0, 0.05)
    partial = dg.Location("dx", "seq_tail", 5, 5, 0.5, 1.0, 0.01)
    ev = _ev([big, small, partial])
    assert ev.where("dx") == small
    assert ev.located("dx", "tile_tail") and not ev.located("dx", "vec_tail")
    assert ev.at("dx", "vec_tail") == big and ev.touches("dx", "seq_tail")
    assert not ev.spread("dx")
    whole = dg.Location("dx", "batch_0", 10, 50, 0.5, 0.2, 0.5)
    assert _ev([whole]).spread("dx") and _ev([whole]).where("dx") is None
    # a term explaining the error is no "spread" either
    assert not _ev([whole], [dg.TermFit("dx", "t", -1.0, 0.0)]).spread("dx")


def test_explains_partly_and_loses():
    ev = _ev(fits=[dg.TermFit("dx", "state_path", -1.02, 0.03),
                   dg.TermFit("dx", "tile_halo_64", 0.4, 0.6)])
    assert ev.explains("dx", "state_path", -1) and not ev.explains("dx", "state_path", 1)
    assert ev.loses("dx", "state_path") and not ev.partly("dx", "state_path")
    assert ev.partly("dx", "tile_halo") and not ev.loses("dx", "tile_halo")


class Toy(enum.Enum):
    NARROW = "narrow"  # needs silu and bias
    BROAD = "broad"  # needs silu


TOY = dg.DiagnosisSpec(
    causes=(dg.CauseSpec(Toy.NARROW, "narrow", "", lambda f: f["silu"] and f["bias"]),
            dg.CauseSpec(Toy.BROAD, "broad", "", lambda f: f["silu"])),
    rules=(), features=(dg.Feature("silu", "with SiLU"), dg.Feature("bias", "with bias"),
                        dg.Feature("n", "n", numeric=True)),
    case_features=lambda p: p, regions=lambda *a: [], terms=lambda *a: {})


def _toy_run(silu_nobias_fails: bool):
    feats, failed, cands = [], [], []
    for i in range(20):  # SiLU with bias: all fail, both causes fit
        feats.append({"silu": True, "bias": True, "n": i})
        failed.append(True)
        cands.append(("narrow", "broad"))
    for i in range(4):  # SiLU without bias
        feats.append({"silu": True, "bias": False, "n": i})
        failed.append(silu_nobias_fails)
        cands.append(("broad",) if silu_nobias_fails else ())
    for i in range(10):  # no SiLU: pass
        feats.append({"silu": False, "bias": True, "n": i})
        failed.append(False)
        cands.append(())
    return feats, failed, cands


def test_the_cause_needing_fewer_features_loses_when_the_extra_items_pass():
    scores = dg.score_causes(TOY, *_toy_run(silu_nobias_fails=False))
    assert scores[0].cause == "narrow"
    assert scores[0].score - scores[1].score > 5  # nats: four passing items decide it
    broad = next(s for s in scores if s.cause == "broad")
    assert broad.consistency == 1.0 and broad.coverage == pytest.approx(20 / 24)


def test_the_broad_cause_wins_when_the_extra_items_fail_too():
    scores = dg.score_causes(TOY, *_toy_run(silu_nobias_fails=True))
    assert scores[0].cause == "broad"
    narrow = next(s for s in scores if s.cause == "narrow")
    assert narrow.consistency == pytest.approx(20 / 24)


def test_feature_effects_only_with_never_with_and_grows():
    feats, failed, _ = _toy_run(silu_nobias_fails=False)
    mags = [float(f["n"]) if bad else None for f, bad in zip(feats, failed)]
    effects = {(e.feature, e.kind.value): e
               for e in dg.feature_effects(TOY, feats, failed, mags)}
    only = effects[("silu", "only_with")]
    # contrasted on the items alike in what every failure shares (bias): the 4 SiLU items
    # without bias are no contrast for "only with SiLU", the 10 without SiLU are
    assert (only.n_fail_with, only.n_with, only.n_fail_without, only.n_without) == \
        (20, 20, 0, 10)
    assert only.phrase() == ("fails only with SiLU (fails 20 of 20 comparable cases with "
                             "it, 0 of 10 without)")
    assert effects[("bias", "only_with")].n_without == 4
    assert effects[("n", "grows")].rho == pytest.approx(1.0)
    assert effects[("n", "grows")].phrase().endswith("over 20 failing items)")
    only_plain = [not f["silu"] for f in feats]  # failing exactly without SiLU
    effects = {(e.feature, e.kind): e for e in dg.feature_effects(TOY, feats, only_plain)}
    never = effects[("silu", dg.EffectKind.NEVER_WITH)]
    assert (never.n_fail_with, never.n_with) == (0, 20)
    assert never.phrase() == ("never fails with SiLU (fails 0 of 20 comparable cases with "
                              "it, 10 of 10 without)")
    assert ("silu", dg.EffectKind.ONLY_WITH) not in effects


def test_no_only_with_claim_without_comparable_cases():
    """Every failure has dropout, and every dropout case has two rows or more: "fails only
    with more than one row" has no comparable single-row case (all lack dropout), so it is
    not claimed; "fails only with dropout" is, contrasted on the multi-row cases."""
    spec = dg.DiagnosisSpec(
        causes=(), rules=(), features=(dg.Feature("dropout", "with dropout"),
                                       dg.Feature("multi_row", "with more than one row")),
        case_features=lambda p: p, regions=lambda *a: [], terms=lambda *a: {})
    feats = [{"dropout": True, "multi_row": True}] * 6 + \
        [{"dropout": False, "multi_row": True}] * 5 + [{"dropout": False, "multi_row": False}] * 3
    failed = [True] * 6 + [False] * 8
    effects = {(e.feature, e.kind): e for e in dg.feature_effects(spec, feats, failed)}
    assert ("multi_row", dg.EffectKind.ONLY_WITH) not in effects
    drop = effects[("dropout", dg.EffectKind.ONLY_WITH)]
    assert (drop.n_fail_with, drop.n_with, drop.n_fail_without, drop.n_without) == \
        (6, 6, 0, 5)
    # a feature defined through another (Feature.implies) is no contrast for it: "dropout
    # and p > 0" is true of every failure, and of no case without dropout
    spec2 = dg.DiagnosisSpec(
        causes=(), rules=(), features=spec.features + (
            dg.Feature("scaled", "with p > 0", implies=("dropout",)),),
        case_features=lambda p: p, regions=lambda *a: [], terms=lambda *a: {})
    feats2 = [{**f, "scaled": f["dropout"]} for f in feats[:6]] + \
        [{"dropout": True, "multi_row": True, "scaled": False}] * 2 + \
        [{**f, "scaled": False} for f in feats[6:]]
    failed2 = [True] * 6 + [False] * 10
    effects = {(e.feature, e.kind): e for e in dg.feature_effects(spec2, feats2, failed2)}
    assert effects[("dropout", dg.EffectKind.ONLY_WITH)].n_without == 5
    assert effects[("scaled", dg.EffectKind.ONLY_WITH)].n_without == 2  # p = 0 with dropout


# ---------------------------------------------------------------- stored rows

@pytest.fixture(scope="module")
def failing_rows():
    """Rows of a planted right-halo bug and of a correct model on three cases."""
    bad = Implementation(op="causal_conv1d", name="halo_bug", kind="external",
                         fn=lambda **kw: backward_tiled(**kw, bugs=frozenset(
                             {__import__("bwd_suite.kernels.causal_conv1d.tiled",
                                         fromlist=["Bug"]).Bug.NO_RIGHT_HALO})))
    good = registry.select_implementations("causal_conv1d", ["torch_tiled"])[0]
    env = results.environment("cpu", "test")
    rows = []
    for L, act in ((200, "silu"), (150, "none"), (40, "none")):
        ctx = CaseContext(SPEC, case(seqlen=L, activation=act), OPTS)
        for impl in (bad, good):
            row = run_item(ctx, impl, env, CEIL, {})
            row.case_id = f"c{L}{act}"
            rows.append(row)
    return rows


def test_run_diagnosis_is_the_same_from_memory_and_from_parquet(failing_rows, tmp_path):
    path = tmp_path / "run.parquet"
    with results.ResultsWriter(path) as w:
        for r in failing_rows:
            w.append(r)
    back = results.read_rows([path])
    assert [r.diagnosis if isinstance(r.diagnosis, str) else None for r in back] == \
        [r.diagnosis for r in failing_rows]
    mem = {d.impl: d for d in dg.diagnose_run(failing_rows)}
    disk = {d.impl: d for d in dg.diagnose_run(back)}
    assert mem["halo_bug"].cause == disk["halo_bug"].cause == "right_halo"
    assert mem["halo_bug"].n_failed == 2  # L=40 is one tile: nothing to miss
    assert mem["torch_tiled"].cause is None and mem["torch_tiled"].text.startswith("survived")
    assert [s.score for s in mem["halo_bug"].scores] == \
        pytest.approx([s.score for s in disk["halo_bug"].scores])


def test_summary_shows_the_diagnosis_next_to_each_failure(failing_rows):
    text = summary.render(failing_rows)
    fail_line = next(i for i, ln in enumerate(text.splitlines()) if ln.startswith("  FAIL"))
    lines = text.splitlines()
    assert lines[fail_line + 2].strip().startswith("diagnosis: likely right halo")
    assert "likely causes across the run:" in text
    assert "  halo_bug: likely right halo of upstream gradients missing: 2/3 items fail" \
        in text


# ---------------------------------------------------------------- schema version 2

def _v1_table(rows):
    v1 = pa.schema([f for f in results.SCHEMA if f.name not in
                    ("diagnosis", "diagnosis_cause", "error_locations", "error_terms",
                     "same_copy_s", "frac_same_copy",  # version 3
                     "timing_pacing")],  # version 5
                   metadata={b"bwd_suite_schema_version": b"1"})
    return pa.Table.from_pylist([{k: r.to_record()[k] for k in v1.names} for r in rows],
                                schema=v1)


def test_version_1_files_are_upgraded_in_memory_with_null_diagnosis(failing_rows, tmp_path):
    pq.write_table(_v1_table(failing_rows), tmp_path / "old.parquet")
    with results.ResultsWriter(tmp_path / "new.parquet") as w:
        for r in failing_rows:
            w.append(r)
    df = results.read_results([tmp_path])  # both versions in one frame
    assert len(df) == 2 * len(failing_rows)
    old = df[df.diagnosis_cause.isna() & (df.verdict == "fail")]
    assert len(old) == 2 and old.error_locations.isna().all()
    assert list(df.columns) == results.SCHEMA.names
    # the run-level diagnosis still weighs version-1 rows, on their features alone
    assert dg.diagnose_run(map(ResultRow.from_record, old.to_dict("records")))[0].n_failed == 2


def test_the_saved_version_1_runs_still_load():
    v1 = [f for f in sorted((ROOT / "tests" / "data").glob("*.parquet"))
          if pq.read_schema(f).metadata[b"bwd_suite_schema_version"] == b"1"]
    assert v1, "the foundation runs are version 1"
    df = results.read_results(v1)
    assert len(df) and df.diagnosis.isna().all() and df.error_terms.isna().all()
    assert list(df.columns) == results.SCHEMA.names


def test_newer_or_unknown_versions_are_refused_in_one_line(failing_rows, tmp_path):
    table = _v1_table(failing_rows).replace_schema_metadata(
        {b"bwd_suite_schema_version": str(results.SCHEMA_VERSION + 1).encode()})
    pq.write_table(table, tmp_path / "future.parquet")
    with pytest.raises(SuiteInputError) as e:
        results.read_results([tmp_path / "future.parquet"])
    assert "newer than this suite reads" in str(e.value) and "\n" not in str(e.value)
    pq.write_table(table.replace_schema_metadata({b"bwd_suite_schema_version": b"0"}),
                   tmp_path / "ancient.parquet")
    with pytest.raises(SuiteInputError, match="schema version 0 cannot be upgraded"):
        results.read_results([tmp_path / "ancient.parquet"])


# ---------------------------------------------------------------- the period search

def _pattern(shape, nouns, where, preferred=None):
    """The period search's patterns of a mask with `where` set, by noun."""
    bad = torch.zeros(shape, dtype=torch.bool)
    bad[where] = True
    return {p.noun: p for p in dg.axis_patterns("dx", bad, nouns, preferred)}


def test_any_period_is_found_with_its_phase():
    # the last 3 of every 40 steps (no 64- or 128-step tile the op knows of)
    t = torch.arange(400)
    p = _pattern((2, 4, 400), ("batch", "channel", "step"), (..., t % 40 >= 37))["step"]
    assert (p.kind, p.period, sorted(p.residues)) == ("period", 40, [37, 38, 39])
    assert p.words() == "in the last 3 steps of each 40-step tile"
    # a period of 2 is not taken for 4, 6, ... (the smallest P that explains them)
    p = _pattern((2, 4, 400), ("batch", "channel", "step"), (..., t % 2 == 1))["step"]
    assert (p.period, sorted(p.residues)) == (2, [1])


def test_every_tile_but_the_first_and_the_remainder_past_the_last_multiple():
    p = _pattern((160, 4), ("channel", "tap"), (slice(64, None),))["channel"]
    assert p.kind == "after" and p.every_tile_but_first() and not p.past_multiple_of(8)
    assert p.words() == "in every 64-channel tile but the first (channels >= 64 of 160)"
    # with one tile after the first, the same channels are the remainder past 64
    p = _pattern((96, 4), ("channel", "tap"), (slice(64, None),))["channel"]
    assert p.kind == "remainder" and p.past_multiple_of(64)
    # steps 96..99 of 100: past the last multiple of 8 (and of 16, 32, 48, 96)
    p = _pattern((2, 4, 100), ("batch", "channel", "step"), (..., slice(96, None)),
                 {"step": (8, 64)})["step"]
    assert p.kind == "remainder" and p.period == 8 and p.past_multiple_of(32)
    assert not p.past_multiple_of(64) and "remainder 4" in p.words()
    assert dg.remainder_periods(96, 100) == [6, 8, 12, 16, 24, 32, 48, 96]


def test_single_rows_channels_and_the_first_and_last_index_of_each_axis():
    shape, nouns = (5, 6, 70), ("batch", "channel", "step")
    assert _pattern(shape, nouns, (slice(None), 3))["channel"].words() == \
        "only in channel 3 (of 6)"
    first = _pattern(shape, nouns, (..., 0))["step"]
    assert first.first and first.suffix_start is None
    last = _pattern(shape, nouns, (4,))["batch"]
    assert last.last and last.suffix_start == 4 and last.words().startswith(
        "only in the last batch")


def test_scattered_errors_are_no_period_and_no_tile():
    # three wrong elements past column 500: no "every 500-column tile but the first", no
    # period with a clean rest; the row they share is all that holds
    pats = _pattern((4, 1000), ("row", "column"), (0, [500, 700, 901]))
    assert set(pats) == {"row"} and pats["row"].first
    # random errors over a fifth of the elements: nothing along any axis
    g = torch.Generator().manual_seed(3)
    bad = torch.rand((8, 16, 300), generator=g) < 0.2
    assert dg.axis_patterns("dx", bad, ("batch", "channel", "step")) == []


def test_spread_is_checked_along_every_axis():
    # dx wrong in one channel only, at every step: no time region holds it, the channel
    # axis does, so it is not "spread" (the SiLU rules need spread errors)
    bad = torch.zeros((2, 8, 50), dtype=torch.bool)
    bad[:, 5] = True
    locs = [p.location() for p in dg.axis_patterns("dx", bad, ("batch", "channel", "step"))]
    ev = _ev(locs)
    assert not ev.spread("dx") and ev.along("dx", "channel").t == 5
    assert _ev([]).spread("dx")
    # stored as locations and parsed back unchanged
    p = ev.along("dx", "channel")
    assert dg.AxisPattern.from_location(p.location()) == p


def test_the_generic_rules_name_what_the_search_finds():
    def cause_of(where, shape=(4, 200), nouns=("row", "column")):
        bad = torch.zeros(shape, dtype=torch.bool)
        bad[where] = True
        locs = [p.location() for p in dg.axis_patterns("dx", bad, nouns, {"column": (8,)})]
        return dg.candidates(SPEC.diagnosis, _ev(locs, **_plain_features()))
    assert cause_of((slice(None), slice(197, None)))[0] == "remainder"
    assert cause_of((slice(None), slice(64, None)))[0] == "tile_offset"
    assert cause_of((slice(1, None),))[0] == "stride"
    assert cause_of((3,))[0] == "last_index"
    assert cause_of((slice(None), torch.arange(200) % 16 == 5))[0] == "tile_position"


def _plain_features() -> dict:
    return dict(SPEC.diagnosis.case_features(SPEC.params.defaults()))


def test_conv1d_dweight_wrong_past_the_first_channel_tile_is_named_as_such():
    def perturb(out, ctx):
        out["dweight"][64:] += 1.0
    row = planted(perturb, dim=160, seqlen=40)
    assert row.verdict == "fail"
    assert "dweight wrong in every 64-channel tile but the first" in row.diagnosis
    assert row.diagnosis_cause == "tile_offset"


def test_conv1d_dx_wrong_past_the_last_multiple_of_P_steps():
    def perturb(out, ctx):
        out["dx"][..., 96:] *= 1.5
    row = planted(perturb, seqlen=100)
    assert "dx wrong only past the last multiple of 8 steps" in row.diagnosis, \
        row.diagnosis
    assert row.diagnosis_cause == "remainder"


# ---------------------------------------------------------------- evidence at run level

def test_a_run_whose_failing_items_name_no_cause_is_unclassified():
    # every item fails, none names a cause: the cause needing no feature would fit the
    # features best, but no item supports it
    scores = dg.score_causes(TOY, [{"silu": True, "bias": True, "n": i} for i in range(10)],
                             [True] * 10, [()] * 10)
    assert scores and all(s.support == 0 for s in scores)
    assert dg.supported(scores, 10) is None
    # one supporting item in ten is enough, none in 11 is not (SUPPORT = 10%)
    scores = dg.score_causes(TOY, [{"silu": True, "bias": True, "n": i} for i in range(11)],
                             [True] * 11, [("broad",)] + [()] * 10)
    assert dg.supported(scores, 11) is None
    assert dg.supported(scores, 10).cause == "broad"


def test_a_few_wrong_rows_are_no_period():
    # 4 wrong rows of 13 fit "3 of every 6 rows" with a clean rest; too few repeats
    pats = _pattern((13, 50), ("row", "column"), ([0, 1, 4, 7], 3))
    assert "row" not in pats or pats["row"].kind != "period"
    # 9 rows of 13, rows 1-3 of each 4: a period of 4
    rows = [r for r in range(13) if r % 4]
    assert _pattern((13, 50), ("row", "column"), (rows,))["row"].period == 4


# ---------------------------------------------------------------- bugs of ports, as stories

def x_storage_as_other_layout(*, x, out, **kw):
    """The yardstick on x's storage read as dense in the other layout, as a kernel that
    takes a raw pointer and ignores the strides."""
    B, D, L = x.shape
    dense = (D * L, L, 1) if x.stride(1) == 1 else (L * D, 1, D)
    torch_ref(x=torch.as_strided(x, (B, D, L), dense, x.storage_offset()), out=out, **kw)


def state_slots_unmatched(*, x, dout, initial_states, out, **kw):
    """The yardstick with the initial-state slots matched to no sequence: nothing reads
    the initial states (zeros read alike), and dinitial_states gets only what dfinal_states
    passes through."""
    torch_ref(x=x, dout=dout, initial_states=torch.zeros_like(initial_states), out=out, **kw)
    rest = {k: v.clone() for k, v in out.items()}
    torch_ref(x=x, dout=torch.zeros_like(dout), initial_states=initial_states, out=rest, **kw)
    out["dinitial_states"].copy_(rest["dinitial_states"])


def run_port(fn, **params):
    ctx = CaseContext(SPEC, case(**params), OPTS)
    impl = Implementation(op="causal_conv1d", name=fn.__name__, fn=fn, kind="external")
    return run_item(ctx, impl, None, CEIL, {})


@pytest.mark.parametrize("fn, params, cause, words", [
    (x_storage_as_other_layout, dict(layout="channel_last"), "attribute:x_other_layout",
     "computed with x's storage read as the other layout"),
    (x_storage_as_other_layout, dict(layout="channel_first"), "attribute:x_other_layout",
     "computed with x's storage read as the other layout"),
    (state_slots_unmatched, dict(seq_idx="random", initial_states=True, seqlen=40),
     "attribute:state_slots_unmatched", "computed with the initial-state slots matched to "
     "no sequence"),
    (state_slots_unmatched, dict(seq_idx="random", initial_states=True, seqlen=2,
                                 final_states=True, width=4),
     "attribute:state_slots_unmatched", "computed with the initial-state slots matched to "
     "no sequence"),
], ids=["x-cl", "x-cf", "slots", "slots-short-dfinal"])
def test_a_port_bug_is_named_by_its_perturbed_golden(fn, params, cause, words):
    row = run_port(fn, **params)
    assert row.verdict == "fail", row.reason
    assert row.diagnosis_cause == cause and words in row.diagnosis, row.diagnosis
    assert dg.diagnose_run([row])[0].cause == cause


def test_the_port_stories_are_built_only_where_they_are_known():
    # without seq_idx every state slot is read whatever its id: initial states ignored
    # there are another bug; x in a slice of a wider buffer: the storage holds values the
    # story cannot know
    for fn, params, story in (
            (state_slots_unmatched, dict(initial_states=True), "state_slots_unmatched"),
            (x_storage_as_other_layout, dict(x_sliced=True), "x_other_layout")):
        row = run_port(fn, **params)
        assert row.verdict == "fail" and row.diagnosis_cause != f"attribute:{story}"
        assert f"attr:{story}" not in {f["term"] for f in row.error_terms or ()}
