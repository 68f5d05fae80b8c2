"""Coverage per implementation (suite/coverage.py, `python -m bwd_suite coverage`): the values
and value pairs each implementation ran against those the cases offered, declared
unsupported pairs, pairs no case offered, the binning of numeric parameters, the command's
formats and exit codes, and the stored H200 run."""

import itertools
import json
from pathlib import Path

import pandas as pd
import pytest

from bwd_suite.suite import coverage
from bwd_suite.cli import main as cli
from bwd_suite.suite.outcomes import Verdict
from bwd_suite.suite.results import ResultsWriter, read_results
from bwd_suite.suite.rows import ResultRow

ROOT = Path(__file__).resolve().parents[2]
GPU = ROOT / "tests" / "data" / "h200-foundation-gpu.parquet"
NONE = {}  # no registry: kinds from the values, no check_case, no supports


def row(op, params, impl, verdict="pass", reason="", run_started="2026-01-01T00:00:00"):
    case = f"{op}/g/" + "-".join(f"{k}{json.dumps(v)}" for k, v in sorted(params.items()))
    return ResultRow(op=op, case_id=case, case_group="g", params_json=json.dumps(params),
                     impl=impl, impl_kind="ours", run_started=run_started,
                     run_id=run_started).finish(Verdict(verdict), reason)


def grid(**values) -> list:
    keys = list(values)
    return [dict(zip(keys, combo)) for combo in itertools.product(*values.values())]


def rows_of(op, cases, impls) -> list:
    """Rows of every case for each implementation: impls maps a name to supports(params)
    (None: it runs everything and passes)."""
    out = []
    for name, supports in impls.items():
        for p in cases:
            why = supports(p) if supports else None
            out.append(row(op, p, name, "unsupported" if why else "pass", why or ""))
    return out


def one(cov, impl, op=None):
    found = [c for c in cov.impls if c.impl == impl and (op is None or c.op == op)]
    assert len(found) == 1, [c.impl for c in cov.impls]
    return found[0]


def pairs(c, category):
    return [(g.a_feature, g.a, g.b_feature, g.b) for g in c.missing_pairs
            if g.category == category]


def unordered(found) -> list:
    """Pairs as sets of (feature, value), whichever feature comes first."""
    return [{(fa, a), (fb, b)} for fa, a, fb, b in found]


# -- pairs ------------------------------------------------------------------------------------

def test_one_declared_unsupported_pair_shows_as_exactly_that_pair():
    cases = grid(a=[1, 2], b=[False, True], c=["x", "y"])
    half = lambda p: "a=2 takes no b" if p["a"] == 2 and p["b"] else None  # noqa: E731
    cov = coverage.compute(rows_of("toy", cases, {"full": None, "half": half}),
                           registry=NONE)
    h, f = one(cov, "half"), one(cov, "full")
    assert pairs(h, coverage.UNSUPPORTED_PAIR) == [("a", "2", "b", "true")]
    gap = [g for g in h.missing_pairs if g.category == coverage.UNSUPPORTED_PAIR][0]
    assert gap.n_items == 2 and gap.note == "a=2 takes no b"
    assert h.pairs.unsupported == h.pairs.unsupported_pair == 1
    assert h.pairs.offered == 12 and h.pairs.ran == 11 and h.pairs.not_run == 0
    assert h.pairs.not_offered == 0 and not h.gaps  # the grid offers every pair
    # each value ran somewhere: the per-parameter view has nothing missing
    assert all(p.complete for p in h.params) and h.n_ran == 6
    assert h.unsupported_reasons == (("a=2 takes no b", 2),)
    assert f.missing_pairs == () and f.pairs.ran == f.pairs.offered == 12


def test_a_pair_no_case_offered_shows_as_not_offered():
    cases = [p for p in grid(a=[1, 2], b=[False, True], c=["x", "y"])
             if not (p["a"] == 1 and p["c"] == "y")]
    rows = rows_of("toy", cases, {"full": None})
    c = one(coverage.compute(rows, registry=NONE), "full")
    assert pairs(c, coverage.NEVER_TOGETHER) == [("a", "1", "c", "y")]
    assert c.pairs.not_offered == c.pairs.never_together == 1
    assert c.pairs.unsupported == 0 and c.pairs.ran == c.pairs.offered == 11
    note = c.gaps[0].note
    assert note.startswith("e.g. toy/g/") and ("with c=y" in note or "with a=1" in note)
    # the op's check_case refusing the pair: not a valid case, counted, not listed
    refuse = coverage.OpInfo(check_case=lambda p: ("c", "no") if p["a"] == 1 and
                             p["c"] == "y" else None)
    c = one(coverage.compute(rows, registry={"toy": refuse}), "full")
    assert c.pairs.not_offered == c.pairs.invalid == 1 and not c.gaps
    # the implementation's supports refusing it: outside its features
    outside = coverage.OpInfo(supports={"full": lambda p: "no" if p["a"] == 1 and
                                        p["c"] == "y" else None})
    c = one(coverage.compute(rows, registry={"toy": outside}), "full")
    assert c.pairs.not_offered == c.pairs.outside == 1 and not c.gaps
    assert c.checked == "supports"


def test_unsupported_values_are_explained_per_parameter_and_not_listed_as_pairs():
    cases = grid(a=[1, 2, 3], b=[False, True])
    no3 = lambda p: "a=3 is too big" if p["a"] == 3 else None  # noqa: E731
    rows = rows_of("toy", cases, {"k": no3})
    rows += [row("toy", {"a": 4, "b": False}, "other")]  # a=4: no item of k
    rows[0] = row("toy", cases[0], "k", "error", "boom")  # a=1, b=False: raised
    c = one(coverage.compute(rows, registry=NONE), "k")
    a = [p for p in c.params if p.param == "a"][0]
    assert a.offered == ("1", "2", "3", "4") and a.ran == ("1", "2")
    assert [(m.value, m.why, m.reason) for m in a.missing] == [
        ("3", "unsupported", "a=3 is too big"), ("4", "no item", "")]
    # a=3 never ran at all: its pairs are unsupported, but by the value, not as pairs
    assert c.pairs.unsupported == 2 and c.pairs.unsupported_pair == 0
    assert pairs(c, coverage.UNSUPPORTED_PAIR) == []
    # (a=1, b=false) was offered and raised: not run, with its verdict
    assert pairs(c, coverage.NOT_RUN) == [("a", "1", "b", "false")]
    assert [g.note for g in c.missing_pairs if g.category == coverage.NOT_RUN] == ["1 error"]
    assert dict(c.verdicts) == {"pass": 3, "error": 1, "unsupported": 2}


def test_the_latest_run_of_an_item_counts():
    old = row("toy", {"a": 1, "b": True}, "k", "unsupported", "old", "2026-01-01T00:00:00")
    new = row("toy", {"a": 1, "b": True}, "k", "pass", "", "2026-02-01T00:00:00")
    other = row("toy", {"a": 2, "b": False}, "k")
    c = one(coverage.compute([new, old, other], registry=NONE), "k")
    assert c.n_items == 2 and c.n_ran == 2 and not c.unsupported_reasons


def test_impl_and_op_selection():
    rows = rows_of("toy", grid(a=[1, 2]), {"k": None, "m": None}) + \
        rows_of("other", grid(z=["p", "q"]), {"k": None})
    cov = coverage.compute(rows, impls=["k"], registry=NONE)
    assert [(c.op, c.impl) for c in cov.impls] == [("other", "k"), ("toy", "k")]
    cov = coverage.compute(rows, op="toy", registry=NONE)
    assert [(c.op, c.impl) for c in cov.impls] == [("toy", "k"), ("toy", "m")]


# -- binning ----------------------------------------------------------------------------------

def test_binning_comes_from_the_kind_alone():
    assert coverage.features_of("n", "int", 8) == (coverage.Feature("n", "n", "int", "exact"),)
    assert [f.name for f in coverage.features_of("n", "int", 9)] == ["n", "n mod 8"]
    assert [f.how for f in coverage.features_of("x", "float", 20)] == ["powers of two"]
    assert [f.name for f in coverage.features_of("l", "int_list", 20)] == ["len(l)"]
    assert [f.how for f in coverage.features_of("s", "str", 50)] == ["exact"]
    assert [f.how for f in coverage.features_of("b", "bool", 2)] == ["exact"]
    n, mod = coverage.features_of("n", "int", 20)
    assert [n.label(v)[0] for v in (0, 1, 2, 3, 4, 7, 8, 1000, 32768, 32769, -5)] == [
        "0", "1", "2-3", "2-3", "4-7", "4-7", "8-15", "512-1023", "32768-65535",
        "32768-65535", "-(4-7)"]
    assert [mod.label(v)[0] for v in (8, 16, 1024, 1, 7, 33, 32769)] == \
        ["0"] * 3 + ["1-7"] * 4
    (x,) = coverage.features_of("x", "float", 20)
    assert [x.label(v)[0] for v in (0.0, 0.1, 0.5, 1.0, 1.5, 1000.0, -0.3)] == [
        "0.0", "[0.0625, 0.125)", "[0.5, 1)", "[1, 2)", "[1, 2)", "[512, 1024)",
        "-[0.25, 0.5)"]
    (ln,) = coverage.features_of("l", "int_list", 20)
    assert [ln.label(v)[0] for v in ([], [5], [1, 2], [1, 2, 3], [1] * 9)] == \
        ["0", "1", "2-3", "2-3", "8-15"]


def test_many_numeric_values_are_binned_for_pairs_but_listed_exactly():
    """No case combines dropout with a length in 32768-65535: one never-together pair of
    the binned length (the range), none of the exact values."""
    lengths = list(range(1, 13)) + [32769]
    cases = [{"length": n, "dropout": False, "p": 0.0} for n in lengths] + \
        [{"length": n, "dropout": True, "p": 0.5} for n in (1, 2, 4, 8, 9)]
    c = one(coverage.compute(rows_of("soft", cases, {"k": None}), registry=NONE), "k")
    length = [p for p in c.params if p.param == "length"][0]
    assert len(length.offered) == 13 and length.complete  # per parameter: exact values
    gaps = unordered(pairs(c, coverage.NEVER_TOGETHER))
    assert {("length", "32768-65535"), ("dropout", "true")} in gaps
    assert {("length mod 8", "1-7"), ("dropout", "true")} not in gaps  # 1 and 9 with dropout
    length_bins = {v for g in gaps for f, v in g if f == "length"}
    assert length_bins <= {"1", "2-3", "4-7", "8-15", "32768-65535"}
    assert not any({f for f, _ in g} == {"length", "length mod 8"} for g in gaps)
    # dropout=false with p=0.5 was never offered either; the op's check_case refuses it
    assert {("dropout", "false"), ("p", "0.5")} in gaps
    refuse = coverage.OpInfo(check_case=lambda p: ("p", "without dropout")
                             if p["p"] and not p["dropout"] else None)
    c = one(coverage.compute(rows_of("soft", cases, {"k": None}),
                             registry={"soft": refuse}), "k")
    gaps = unordered(pairs(c, coverage.NEVER_TOGETHER))
    assert {("dropout", "false"), ("p", "0.5")} not in gaps
    assert {("length", "32768-65535"), ("dropout", "true")} in gaps
    binning = {b.param: b for b in coverage.compute(
        rows_of("soft", cases, {"k": None}), registry=NONE).binning}
    assert binning["length"].features == ("length", "length mod 8")
    assert binning["p"].how == "exact" and binning["dropout"].how == "exact"


def test_kinds_come_from_the_paramset_when_the_registry_has_the_op():
    """Integer-valued JSON numbers of a float parameter: float ranges with the op's kind,
    int ranges (and mod 8) from the values alone."""
    cases = [{"scale": v, "flag": f} for v in range(1, 11) for f in (False, True)]
    rows = rows_of("toy", cases, {"k": None})
    by_values = {b.param: b for b in coverage.compute(rows, registry=NONE).binning}
    assert by_values["scale"].kind == "int" and len(by_values["scale"].features) == 2
    info = coverage.OpInfo(order=("scale", "flag"), kinds={"scale": "float", "flag": "bool"})
    by_kind = {b.param: b for b in coverage.compute(rows, registry={"toy": info}).binning}
    assert by_kind["scale"].kind == "float" and by_kind["scale"].features == ("scale",)


def test_real_ops_use_the_registry():
    info = coverage.registry_info()
    assert {"causal_conv1d", "layer_norm", "softmax"} <= set(info)
    soft = info["softmax"]
    assert soft.kinds["length"] == "int" and soft.kinds["p"] == "float"
    assert soft.check_case is not None and "torch_ref" in soft.supports


# -- the stored H200 run ----------------------------------------------------------------------

def test_h200_gpu_run_torch_ref_ran_every_value_offered():
    df = read_results([GPU])
    cov = coverage.compute(df)
    c = one(cov, "torch_ref", "causal_conv1d")
    assert c.n_items == c.n_ran == len(df)
    assert all(p.complete and p.ran == p.offered for p in c.params)
    names = {p.param for p in c.params}
    assert {"seqlen", "width", "layout", "seq_idx", "chunks"} <= names
    assert c.pairs.ran == c.pairs.offered and c.pairs.unsupported == c.pairs.not_run == 0
    assert c.pairs.not_offered == c.pairs.never_together + c.pairs.outside + c.pairs.invalid
    assert len(c.gaps) == c.pairs.never_together
    binned = {b.param for b in cov.binning if b.how != "exact"}
    assert "seqlen" in binned and "dim" in binned  # many lengths and sizes


# -- the command ------------------------------------------------------------------------------

@pytest.fixture
def results(tmp_path) -> Path:
    cases = grid(a=[1, 2], b=[False, True], c=["x", "y"])
    half = lambda p: "a=2 takes no b" if p["a"] == 2 and p["b"] else None  # noqa: E731
    path = tmp_path / "run.parquet"
    with ResultsWriter(path) as w:
        for r in rows_of("toy", cases,
                         {"full": None, "half": half}):
            w.add(r)
    return path


def test_command_text(results, capsys):
    assert cli(["coverage", str(results)]) == 0
    out = capsys.readouterr().out
    assert "toy / half" in out and "toy / full" in out
    assert "a=2 x b=true  2 items: a=2 takes no b" in out
    assert "offered, declared unsupported" in out


def test_command_json(results, capsys):
    assert cli(["coverage", str(results), "--format", "json", "--impl", "half"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["format"] == "bwd-suite-coverage" and doc["items"] == 16
    (c,) = doc["implementations"]
    assert c["impl"] == "half" and c["verdicts"] == {"pass": 6, "unsupported": 2}
    assert [(g["a_feature"], g["a"], g["b_feature"], g["b"]) for g in c["missing_pairs"]
            if g["category"] == "unsupported"] == [("a", "2", "b", "true")]
    assert c["pairs"]["unsupported"] == 1 and all(p["complete"] for p in c["params"])


def test_command_markdown(results, capsys):
    assert cli(["coverage", str(results), "--format", "markdown", "--op", "toy",
                "--max-lines", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("## Coverage") and "| toy | half | 8 | 6 |" in out
    assert "`a=2 x b=true`" in out


@pytest.mark.parametrize("extra", [["--op", "nope"], ["--impl", "nope"], ["--impl", ","],
                                   ["--max-lines", "-1"]])
def test_command_bad_input_is_one_line_and_exit_2(results, capsys, extra):
    assert cli(["coverage", str(results), *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --") and "\n" not in err


def test_command_missing_or_empty_results_exit_2(tmp_path, capsys):
    assert cli(["coverage", str(tmp_path / "none.parquet")]) == 2
    assert "no such results file" in capsys.readouterr().err
    empty = tmp_path / "empty.parquet"
    ResultsWriter(empty).close()
    assert cli(["coverage", str(empty)]) == 2
    err = capsys.readouterr().err.strip()
    assert "holds no result rows" in err and "\n" not in err


def test_frames_and_rows_give_the_same_coverage(results):
    df = read_results([results])
    assert coverage.compute(df) == coverage.compute(
        [ResultRow.from_record(r) for r in df.to_dict("records")])
    assert coverage.compute(pd.DataFrame()).impls == ()
