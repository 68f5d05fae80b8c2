"""`python -m bwd_suite fuzz`: boundary-biased domains, deterministic drawing that skips what
cannot run, greedy shrinking to a known minimum, case-file blocks that load back and still
fail, and bad input exiting 2 (docs/fuzz.md)."""

import itertools
import json
import random
import re
import tomllib

import pytest
import torch

from bwd_suite.kernels.softmax.torch_ref import torch_ref as softmax_ref
from bwd_suite.suite import registry
from bwd_suite.suite.cases import load_file
from bwd_suite.cli import main
from bwd_suite.suite.driver import Driver
from bwd_suite.suite.fuzz.domains import boundary_values, sample_float, sample_int
from bwd_suite.suite.fuzz.draw import (DrawStats, axis_product, draw_cases, draw_params, fuzz_case,
                             out_of_bounds)
from bwd_suite.suite.fuzz.shrink import Failure, failure_of, input_numel, repaired, shrink
from bwd_suite.suite.fuzz.sizes import SIZES
from bwd_suite.suite.fuzz.toml import case_block
from bwd_suite.suite.outcomes import FailureKind, Verdict
from bwd_suite.suite.params import FloatRange, IntRange, Param
from bwd_suite.suite.plan import Plan
from bwd_suite.suite.registry import Implementation
from bwd_suite.suite.results import read_rows
from bwd_suite.suite.runner import RunOptions

CPU = torch.device("cpu")
OPTS = RunOptions(device=CPU, golden_device=CPU, repeats=1, timing=False)
SOFTMAX = registry.op("softmax")


def _impl(op, name):
    return next(i for i in registry.implementations(op) if i.name == name)


# ---------------------------------------------------------------- domains

def test_boundary_set_holds_the_values_kernels_break_at():
    b = set(boundary_values(1, 5000))
    for v in (1, 2, 3, 5000, 4999, 63, 64, 65, 127, 128, 129, 4095, 4096, 4097, 37, 131,
              56, 72, 120, 136, 1016, 1032):
        assert v in b, v
    assert all(1 <= v <= 5000 for v in b)
    assert boundary_values(2, 8) == [2, 3, 4, 5, 6, 7, 8]


def test_integers_are_drawn_boundary_biased_and_in_range():
    rng = random.Random(1)
    high = 1 << 20
    draws = [sample_int(rng, 1, high) for _ in range(3000)]
    assert all(1 <= v <= high for v in draws)
    pow2 = {(1 << k) + d for k in range(21) for d in (-1, 0, 1)}
    near64 = [v for v in draws if min(v % 64, 64 - v % 64) <= 8]
    # uniform draws would hit 2^k +- 1 about 0.006% and near a multiple of 64 26% of the time
    assert sum(v in pow2 for v in draws) > 0.15 * len(draws)
    assert len(near64) > 0.45 * len(draws)
    assert {1, high} <= set(draws)
    assert set(draws) & {2, 3, 5, 7, 11, 13}
    assert max(draws) > 1 << 16 and sum(v <= 16 for v in draws) > 0.1 * len(draws)
    small = [sample_int(rng, 2, 8) for _ in range(500)]
    assert set(small) == set(range(2, 9))


def test_floats_draw_special_values_and_stay_in_an_open_range():
    d = FloatRange(0.0, 1.0, special=(0.0, 0.5, 0.999), high_open=True)
    rng = random.Random(2)
    draws = [sample_float(rng, d) for _ in range(2000)]
    assert all(0.0 <= v < 1.0 for v in draws)
    for s in d.special:
        assert draws.count(s) > 100
    assert len(set(draws)) > 100  # and values in between


def test_domains_are_validated_against_the_parameter():
    with pytest.raises(ValueError, match="IntRange domain"):
        Param("n", "int", 4, "n", domain=FloatRange(0.0, 1.0))
    with pytest.raises(ValueError, match="no domain"):
        Param("s", "str", "a", "s", choices=("a", "b"), domain=IntRange(1, 2))
    with pytest.raises(ValueError, match="outside its domain"):
        Param("n", "int", 40, "n", domain=IntRange(1, 16))
    with pytest.raises(ValueError, match="below the minimum"):
        Param("n", "int", 4, "n", minimum=2, domain=IntRange(1, 16))
    assert IntRange(1, 64, caps={"small": 8}).high_for("small") == 8
    assert IntRange(1, 64, caps={"small": 8}).high_for("gpu") == 64


@pytest.mark.parametrize("op", sorted(registry.ops()))
def test_every_op_declares_size_axes_and_its_numbers_domains(op):
    spec = registry.op(op)
    kinds = {p.name: p for p in spec.params.params}
    assert any(isinstance(p.domain, IntRange) and p.domain.axis for p in kinds.values())
    for p in kinds.values():
        if p.kind in ("int", "float", "int_list"):
            assert p.domain is not None, f"{op}.{p.name} has no domain"


# ---------------------------------------------------------------- drawing

def _ids(op, impl, seed, n, size="small", stats=None):
    spec = registry.op(op)
    return [c.id for c in itertools.islice(
        draw_cases(spec, impl, "cpu", seed, SIZES[size], stats), n)]


@pytest.mark.parametrize("op", sorted(registry.ops()))
def test_drawing_is_deterministic_by_seed_and_within_the_size(op):
    impl = _impl(op, "torch_ref")
    assert _ids(op, impl, 7, 60) == _ids(op, impl, 7, 60)
    assert _ids(op, impl, 7, 60) != _ids(op, impl, 8, 60)
    spec = registry.op(op)
    small = list(itertools.islice(draw_cases(spec, impl, "cpu", 3, SIZES["small"]), 200))
    assert all(axis_product(spec, c.params) <= SIZES["small"].max_numel for c in small)
    assert all(spec.check_case(c.params) is None for c in small)
    assert all(c.id.startswith(f"{op}/fuzz/") for c in small)
    assert len({c.id for c in small}) == len(small)
    big = list(itertools.islice(draw_cases(spec, impl, "cpu", 3, SIZES["gpu"]), 200))
    # the gpu profile reaches cases far larger than the small one (by the bytes they move:
    # an op's size may lie outside its axes, as adamw's tensor sizes do)
    assert (max(spec.bytes(c.params) for c in big)
            > 64 * max(spec.bytes(c.params) for c in small))
    assert all(axis_product(spec, c.params) <= SIZES["gpu"].max_numel for c in big)


def test_refused_and_unsupported_combinations_are_skipped_and_counted():
    odd = Implementation(op="softmax", name="even_rows_only", fn=softmax_ref,
                         supports=lambda p: "odd rows" if p["rows"] % 2 else None)
    stats = DrawStats()
    cases = list(itertools.islice(
        draw_cases(SOFTMAX, odd, "cpu", 0, SIZES["small"], stats), 100))
    assert len(cases) == stats.drawn == 100
    assert all(c.params["rows"] % 2 == 0 for c in cases)
    assert all(SOFTMAX.check_case(c.params) is None for c in cases)
    # p without dropout is refused by softmax's check_case: those draws were skipped
    assert stats.refused > 0 and stats.unsupported > 0
    assert stats.reasons["odd rows"] == stats.unsupported
    cuda_only = Implementation(op="softmax", name="cuda_only", fn=softmax_ref,
                               devices=("cuda",))
    assert list(draw_cases(SOFTMAX, cuda_only, "cpu", 0, SIZES["small"],
                           max_attempts=50)) == []


@pytest.mark.parametrize("op", sorted(registry.ops()))
def test_drawn_cases_stay_inside_the_ops_fuzz_bounds(op):
    spec = registry.op(op)
    stats = DrawStats()
    impl = _impl(op, "torch_ref")
    cases = list(itertools.islice(draw_cases(spec, impl, "cpu", 4, SIZES["small"], stats),
                                  150))
    assert all(out_of_bounds(spec, c.params, "cpu") is None for c in cases)
    assert stats.ill_posed > 0 and "outside its fuzz bounds" in stats.line()


def test_layer_norm_bounds_keep_ill_posed_draws_out_but_not_the_ordinary_ones():
    spec = registry.op("layer_norm")
    base = dict(spec.params.defaults(), rows=8, hidden=64, dtype="float32")
    ok = [base, dict(base, x_mean=100.0), dict(base, dtype="bfloat16", rows=100),
          dict(base, dy_mean=10.0, dy_peak=100.0), dict(base, hidden=3, affine=False)]
    for p in ok:
        assert out_of_bounds(spec, p, "cpu") is None, p
    # the observed ill-posed draws: fp32 N = 2 rows of -1000 +- 1e-6 (dgamma all
    # cancellation), rows rounding makes constant (spread 0: rstd from eps only)
    bad = {"hidden": dict(base, hidden=2, x_mean=-1000.0, x_std=1e-6),
           "x_mean": dict(base, x_mean=1630.0, x_std=1e-6, eps=1e-5),
           "rows": dict(base, dtype="bfloat16", rows=1000),
           "dy_peak": dict(base, dtype="float16", dy_peak=100.0)}
    for key, p in bad.items():
        assert out_of_bounds(spec, p, "cpu")[0] == key, p
    assert out_of_bounds(spec, bad["rows"], "cuda") is None  # a CPU yardstick's limit
    # eps 0 is a valid case-file value, never drawn (a constant row: rstd = inf)
    assert spec.check_case(dict(base, eps=0.0)) is None
    assert 0.0 not in spec.params.by_name["eps"].domain


def test_shrinking_repairs_variants_that_leave_the_bounds():
    spec = registry.op("layer_norm")
    p = dict(spec.params.defaults(), rows=8, hidden=64, dtype="float32", x_mean=150.0,
             x_std=1.0)
    # x_std halfway to 0 would make |x_mean| * rstd 300: x_mean is reset instead
    assert repaired(spec, dict(p, x_std=0.5), "cpu") == dict(p, x_std=0.5, x_mean=0.0)
    assert repaired(spec, dict(p, x_std=0.5), "cuda") == dict(p, x_std=0.5)
    assert repaired(spec, dict(p, hidden=1), "cpu") is None  # an axis, not reset


def test_a_drawn_case_has_the_id_and_seed_a_case_file_gives_it(tmp_path):
    spec = registry.op("causal_conv1d")
    params = draw_params(spec, random.Random(5), SIZES["small"])
    params.update(chunks=[], dfinal_layout="channel_last")
    case = fuzz_case(spec, params)
    changed = {k: v for k, v in params.items() if v != spec.params.by_name[k].default}
    f = tmp_path / "same.toml"
    f.write_text('op = "causal_conv1d"\n[[case]]\nname = "fuzz"\ntags = ["ci"]\n'
                 + "".join(f"{k} = {json.dumps(v)}\n" for k, v in changed.items()))
    (loaded,) = load_file(f)
    assert (loaded.id, loaded.seed, dict(loaded.params)) == (case.id, case.seed, params)


def test_case_blocks_round_trip_every_kind_of_value(tmp_path):
    spec = registry.op("causal_conv1d")
    params = dict(spec.params.defaults(), seqlen=50, chunks=[3, 17], x_scale=0.125,
                  bias=False, layout="channel_first")
    block = case_block(spec, params, "fuzz-x", 1234, ["why: it \"failed\"\nbadly"])
    data = tomllib.loads(block)
    assert data["case"][0] == {"name": "fuzz-x", "tags": ["ci"], "seqlen": 50,
                               "chunks": [3, 17], "x_scale": 0.125, "bias": False,
                               "layout": "channel_first", "seed": 1234}
    f = tmp_path / "b.toml"
    f.write_text(block)
    (case,) = load_file(f)
    assert dict(case.params) == params and case.seed == 1234


# ---------------------------------------------------------------- shrinking

def _wrong_when_long(*, y, dy, mask, scale, out):
    """softmax's torch_ref, wrong when the row is longer than 37, raising below 10."""
    if y.shape[-1] < 10:
        raise RuntimeError("rows this short are not implemented")
    softmax_ref(y=y, dy=dy, mask=mask, scale=scale, out=out)
    if y.shape[-1] > 37:
        out["dx"].add_(1.0)


def test_the_shrinker_reaches_the_known_minimum_failing_the_same_way():
    impl = Implementation(op="softmax", name="wrong_when_long", fn=_wrong_when_long)
    driver = Driver(OPTS)
    seen = []

    def run(params):
        seen.append(params)
        return driver.rows(Plan.single(SOFTMAX, fuzz_case(SOFTMAX, params), impl))[0]

    start = dict(SOFTMAX.params.defaults(), rows=27, length=900, dtype="float32",
                 logit_scale=10.0, dropout=True, p=0.25, mask="all_kept")
    row = run(start)
    assert failure_of(row) == Failure("fail", "mismatch", "dx")
    shrunk = shrink(SOFTMAX, start, row, run, max_tries=300)
    assert shrunk.params == dict(SOFTMAX.params.defaults(), rows=1, length=38)
    assert not shrunk.exhausted and shrunk.tries == len(seen) - 1
    assert failure_of(shrunk.row) == shrunk.failure
    # the errors of short rows were tried and refused: another failure, not this one
    assert any(p["length"] < 10 for p in seen)
    assert shrunk.key < shrunk.start_key and shrunk.key[0] == input_numel(
        SOFTMAX, shrunk.params)


def test_shrinking_stops_at_its_try_budget():
    impl = Implementation(op="softmax", name="wrong_when_long", fn=_wrong_when_long)
    driver = Driver(OPTS)

    def run(params):
        return driver.rows(Plan.single(SOFTMAX, fuzz_case(SOFTMAX, params), impl))[0]

    start = dict(SOFTMAX.params.defaults(), rows=300, length=900)
    shrunk = shrink(SOFTMAX, start, run(start), run, max_tries=5)
    assert shrunk.tries == 5 and shrunk.exhausted
    assert shrunk.params["length"] > 37 and failure_of(shrunk.row) == shrunk.failure


def test_shrinking_leaves_a_preset_whose_sizes_it_made_inert():
    # adamw's mixed preset (1368 input elements): no one-parameter move is smaller (back
    # to sizes = [1000] is larger); the rewrite or the escape takes the shrinker out
    spec = registry.op("adamw")
    impl = _impl("adamw", "mutant_adamw_coupled_l2")
    driver = Driver(OPTS)

    def run(params):
        return driver.rows(Plan.single(spec, fuzz_case(spec, params), impl))[0]

    start = dict(spec.params.defaults(), preset="mixed")
    shrunk = shrink(spec, start, run(start), run, max_tries=200)
    assert shrunk.params["preset"] == "" and shrunk.key < shrunk.start_key
    assert input_numel(spec, shrunk.params) == 4  # one element: p, g, m, v


def test_a_rewrite_takes_the_shrinker_from_a_preset_to_a_list_it_can_shorten():
    # adamw's mixed preset as the six sizes it stands for; the bug needs two tensors, so
    # resetting the preset (one tensor of 1000) loses it, the rewrite does not
    spec = registry.op("adamw")
    impl = _impl("adamw", "mutant_adamw_step_per_tensor")
    driver = Driver(OPTS)
    seen = []

    def run(params):
        seen.append(params)
        return driver.rows(Plan.single(spec, fuzz_case(spec, params), impl))[0]

    start = dict(spec.params.defaults(), preset="mixed")
    shrunk = shrink(spec, start, run(start), run, max_tries=200)
    assert any(p["sizes"] == [32, 8, 105, 1, 130, 66] and p["preset"] == "" for p in seen)
    assert shrunk.params == dict(spec.params.defaults(), sizes=[1, 1])
    assert input_numel(spec, shrunk.params) == 8 and not shrunk.exhausted


def _fake(rewrites):
    """An op of tensors of `sizes` elements, or the preset "three" (three of 5, sizes
    then inert), whose rewrite spells the preset as sizes = [5, 5, 5]."""
    from types import SimpleNamespace

    from bwd_suite.suite.params import IntList, ParamSet
    ps = ParamSet((
        Param("sizes", "int_list", [20], "", minimum=1,
              domain=IntList(IntRange(1, 100))),
        Param("preset", "str", "", "", choices=("", "three")),
    ), rewrites=(lambda p: [dict(p, preset="", sizes=[5, 5, 5])] if p["preset"] else [])
        if rewrites else None)

    def check(p):
        return ("sizes", "inert") if p["preset"] and p["sizes"] != [20] else None
    return SimpleNamespace(params=ps, check_case=check)


def _row(fails):
    from types import SimpleNamespace
    out = {"name": "y", "err": 1.0 if fails else 0.0, "allowed": 0.5}
    return SimpleNamespace(verdict=Verdict.FAIL if fails else Verdict.PASS,
                           failure_kind="mismatch", reason="", outputs=[out])


def _sizes(p):
    return [5, 5, 5] if p["preset"] else p["sizes"]


@pytest.mark.parametrize("with_rewrites", [True, False])
def test_rewrites_are_moves_of_equal_size_tried_at_a_local_minimum(with_rewrites):
    spec = _fake(with_rewrites)
    seen = []

    def run(p):  # the bug needs two tensors
        seen.append(p)
        return _row(len(_sizes(p)) >= 2)

    start = {"sizes": [20], "preset": "three"}
    shrunk = shrink(spec, start, run(start), run, numel=lambda p: sum(_sizes(p)))
    if with_rewrites:
        assert shrunk.params == {"sizes": [1, 1], "preset": ""}
        # no smaller variant of the preset: the rewrite is tried next, then the escape
        # (the reset to one tensor of 20), which passes
        assert seen[1] == {"sizes": [5, 5, 5], "preset": ""}
        assert {"sizes": [20], "preset": ""} in seen[2:]
    else:
        assert shrunk.params == start
    again = shrink(spec, start, run(start), run, numel=lambda p: sum(_sizes(p)))
    assert again.params == shrunk.params and again.tries == shrunk.tries  # deterministic


def test_a_rewrite_that_leads_nowhere_smaller_leaves_the_case_as_it_was_spelled():
    spec = _fake(True)

    def run(p):  # only three tensors of 5 fail
        return _row(_sizes(p) == [5, 5, 5])

    start = {"sizes": [20], "preset": "three"}
    shrunk = shrink(spec, start, run(start), run, numel=lambda p: sum(_sizes(p)))
    assert shrunk.params == start and shrunk.key == shrunk.start_key


@pytest.mark.parametrize("with_rewrites", [True, False])
def test_the_escape_from_a_preset_still_works_when_its_rewrite_passes(with_rewrites):
    spec = _fake(with_rewrites)
    seen = []

    def run(p):  # one tensor fails, or the preset itself; its rewrite does not
        seen.append(p)
        return _row(bool(p["preset"]) or len(p["sizes"]) == 1)

    start = {"sizes": [20], "preset": "three"}
    shrunk = shrink(spec, start, run(start), run, numel=lambda p: sum(_sizes(p)))
    assert shrunk.params == {"sizes": [1], "preset": ""}
    assert ({"sizes": [5, 5, 5], "preset": ""} in seen) == with_rewrites


# ---------------------------------------------------------------- the command

def _blocks(stdout: str) -> list[str]:
    return [b for b in re.split(r"(?m)^(?=# found by)", stdout) if b.strip()]


def test_fuzz_finds_a_mutant_and_prints_a_case_that_loads_back_and_still_fails(
        tmp_path, capsys):
    out = tmp_path / "fuzz.parquet"
    code = main(["fuzz", "--op", "causal_conv1d", "--impl", "mutant_batch_lost_in_dweight",
                 "--budget", "12", "--seed", "1", "--workers", "0", "--device", "cpu",
                 "--output", str(out), "--quiet"])
    captured = capsys.readouterr()
    assert code == 1, captured.err
    blocks = _blocks(captured.out)
    assert blocks, captured.out
    assert "dweight" in blocks[0] and "diagnosis:" in blocks[0]
    f = tmp_path / "found.toml"
    f.write_text(blocks[0])
    (case,) = load_file(f)
    assert case.params["batch"] == 2 and "ci" in case.tags
    mutant = _impl("causal_conv1d", "mutant_batch_lost_in_dweight")
    (row,) = Driver(OPTS).rows(Plan.single(registry.op("causal_conv1d"), case, mutant))
    assert row.verdict is Verdict.FAIL and row.failure_kind is FailureKind.MISMATCH
    assert failure_of(row).where == "dweight"

    rows = read_rows([out])
    assert {r.profile for r in rows} == {"fuzz"}
    shrunk = [r for r in rows if "shrunk" in r.tags]
    drawn = [r for r in rows if "shrunk" not in r.tags]
    assert len(drawn) == 12 and len(shrunk) == len(blocks)
    assert shrunk[0].params == dict(case.params) and shrunk[0].seed == case.seed
    # two batches of one step of one channel, width 2, no bias: x, dout and weight
    assert input_numel(registry.op("causal_conv1d"), case.params) <= 8


# (op, mutant, budget, the input elements of the smallest ci case catching it: the shrunk
# case must not be larger; scripts/fuzz_zoo.py measures every mutant so)
REPRESENTATIVES = [
    ("layer_norm", "mutant_ln_dgamma_last_row_block", 10, 11, "dgamma"),
    ("softmax", "mutant_softmax_tile_offset", 12, 3075, "dx"),
]


@pytest.mark.parametrize("op, mutant, budget, ci_numel, output", REPRESENTATIVES)
def test_fuzz_finds_mutants_of_every_kind_and_shrinks_them_below_the_zoos_cases(
        op, mutant, budget, ci_numel, output, tmp_path, capsys):
    code = main(["fuzz", "--op", op, "--impl", mutant, "--budget", str(budget), "--seed",
                 "0", "--workers", "0", "--device", "cpu", "--output",
                 str(tmp_path / "f.parquet"), "--quiet"])
    captured = capsys.readouterr()
    assert code == 1, captured.err
    spec = registry.op(op)
    sizes = []
    for k, block in enumerate(_blocks(captured.out)):
        f = tmp_path / f"b{k}.toml"
        f.write_text(block)
        (case,) = load_file(f)
        (row,) = Driver(OPTS).rows(Plan.single(spec, case, _impl(op, mutant)))
        assert row.verdict is Verdict.FAIL  # the committed block still catches it
        sizes.append((input_numel(spec, case.params), failure_of(row).where))
    assert min(sizes)[0] <= ci_numel and output in {w for _, w in sizes}, sizes


def test_fuzz_through_a_worker_process_finds_nothing_in_the_yardstick(tmp_path, capsys):
    out = tmp_path / "ok.parquet"
    code = main(["fuzz", "--op", "softmax", "--impl", "torch_ref", "--budget", "4",
                 "--device", "cpu", "--output", str(out), "--quiet"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "1 worker" in captured.err and captured.out == ""
    assert len(read_rows([out])) == 4


def test_time_stops_the_drawing(tmp_path, capsys):
    out = tmp_path / "t.parquet"
    code = main(["fuzz", "--op", "softmax", "--impl", "torch_ref", "--time", "1e-6",
                 "--workers", "0", "--device", "cpu", "--output", str(out), "--quiet"])
    assert code == 0
    assert "drawing stopped" in capsys.readouterr().err
    assert len(read_rows([out])) == 1


@pytest.mark.parametrize("argv, needles", [
    (["--op", "softmx", "--impl", "torch_ref"], ["--op", "'softmx'"]),
    (["--op", "softmax", "--impl", "torch_reff"], ["--impl", "'torch_reff'"]),
    (["--op", "softmax", "--impl", "mutant_missing_right_halo"],
     ["--impl", "not an implementation of softmax", "causal_conv1d"]),
    (["--op", "softmax", "--impl", "torch_ref,torch_fused_fp32"], ["--impl", "one"]),
    (["--op", "softmax", "--impl", "torch_ref", "--time", "nan"], ["--time", "finite"]),
    (["--op", "softmax", "--impl", "torch_ref", "--budget", "0"], ["--budget", "at least 1"]),
    (["--op", "softmax", "--impl", "torch_ref", "--seed", "-1"], ["--seed"]),
    (["--op", "softmax", "--impl", "torch_ref", "--shrink-tries", "-1"], ["--shrink-tries"]),
    (["--op", "softmax", "--impl", "cuda"] if not torch.cuda.is_available() else
     ["--op", "softmax", "--impl", "torch_ref", "--device", "bogus"], ["--"]),
])
def test_bad_input_exits_2_with_one_line_before_anything_runs(argv, needles, tmp_path,
                                                              capsys):
    assert main(["fuzz", *argv, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    for n in needles:
        assert n in err[0], (n, err[0])
    assert not list(tmp_path.iterdir())


def test_an_existing_output_is_refused(tmp_path, capsys):
    out = tmp_path / "there.parquet"
    out.write_text("")
    assert main(["fuzz", "--op", "softmax", "--impl", "torch_ref", "--output", str(out)]) == 2
    assert "--output" in capsys.readouterr().err
