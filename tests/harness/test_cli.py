"""The command line: bad input exits 2 with one line before anything runs; errors inside
an implementation are recorded and the run goes on; Ctrl-C keeps finished rows."""

import subprocess
import sys
from pathlib import Path

import pytest

from bwd_suite.suite import registry, results
from bwd_suite.suite.cases import PROFILES, load_cases
from bwd_suite.cli import main

ROOT = Path(__file__).resolve().parents[2]
SMALL = ["--case", "causal_conv1d/bias/", "--no-timing", "--repeats", "1", "--quiet",
         "--device", "cpu"]


def _one_line_error(capsys, *needles):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("error: ")
    for n in needles:
        assert n in err[0], (n, err[0])


@pytest.mark.parametrize("argv, needles", [
    (["run", "--profile", "nightlyy"], ["--profile", "'nightlyy'", "smoke"]),
    (["run", "--op", "layer_nrom"], ["--op", "layer_nrom", "causal_conv1d"]),
    (["run", "--impl", "torch_reff"], ["--impl", "torch_reff", "torch_ref"]),
    (["run", "--impl", "no_such_module:fn"], ["--impl", "cannot be imported"]),
    (["run", "--device", "cuda:7"] if not __import__("torch").cuda.is_available()
     else ["run", "--device", "bogus"], ["--device"]),
    (["run", "--repeats", "0"], ["--repeats", "at least 1"]),
    (["run", "--warmup", "-1"], ["--warmup", "at least 0, got -1"]),
    (["run", "--warmup-ms", "-0.5"], ["--warmup-ms", "at least 0, got -0.5"]),
    (["run", "--max-time", "0"], ["--max-time", "above 0, got 0"]),
    (["run", "--case", "no-such-case-id"], ["--case", "no case id of profile",
                                             "'no-such-case-id'"]),
])
def test_bad_names_exit_2_with_one_line(argv, needles, capsys, tmp_path):
    assert main(argv + ["--out", str(tmp_path)]) == 2
    _one_line_error(capsys, *needles)
    assert not list(tmp_path.iterdir()), "nothing may run or be written"


def test_calibrate_rejects_an_empty_copy(capsys):
    assert main(["calibrate", "--size-mib", "0", "--device", "cpu"]) == 2
    _one_line_error(capsys, "--size-mib", "at least 1, got 0")


def test_malformed_case_file_names_file_and_key(capsys, tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text('op = "causal_conv1d"\n[[sweep]]\nname = "s"\ntags = ["ci"]\nwidht = [2]\n')
    assert main(["run", "--cases", str(f), "--out", str(tmp_path / "out")]) == 2
    _one_line_error(capsys, "bad.toml", 'sweep "s"', 'key "widht"', "width")
    assert not (tmp_path / "out").exists()


def test_impossible_combination_exits_2(capsys, tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text('op = "causal_conv1d"\n[[case]]\nname = "c"\ntags = ["ci"]\n'
                 'seqlen = 10\nchunks = [4, 6]\n')
    assert main(["list", "--cases", str(f)]) == 2
    _one_line_error(capsys, "bad.toml", 'case "c"', 'key "chunks"', "leaves no last chunk")


def test_list_shows_ops_profiles_and_implementations(capsys):
    assert main(["list", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    for text in ("causal_conv1d", "smoke", "perf", "torch_ref", "torch_tiled",
                 "mutant_missing_right_halo"):
        assert text in out


def test_run_writes_parquet_and_prints_a_summary(capsys, tmp_path):
    out = tmp_path / "r.parquet"
    code = main(["run", "--profile", "ci", "--case", "causal_conv1d/bias/", "--samples", "3",
                 "--warmup", "1", "--quiet", "--device", "cpu", "--output", str(out)])
    assert code == 0
    stdout = capsys.readouterr().out
    assert "torch_ref" in stdout and "pass" in stdout
    df = results.read_results([out])
    ran = df[df.verdict != "unsupported"]
    assert set(ran.impl) == {"torch_ref", "torch_tiled"}
    # torch_ref's 16-bit dweight is weaker than the bound on these bf16 cases: listed apart
    assert (ran[ran.impl == "torch_tiled"].verdict == "pass").all()
    assert ran[ran.impl == "torch_ref"].verdict.isin(("pass", "weak_yardstick")).all()
    assert ran.time_median_s.notna().all() and (ran.timing_method == "perf_counter").all()
    assert ran.gbps.notna().all() and ran.frac_copy_bw.notna().all()
    # GPU-only implementations are recorded as unsupported on a CPU, with the reason
    gpu_only = df[df.impl.isin(["cuda", "dao"])]
    assert (gpu_only.verdict == "unsupported").all() and gpu_only.reason.str.len().gt(0).all()


def test_raising_implementation_is_recorded_and_the_run_continues(capsys, tmp_path):
    out = tmp_path / "r.parquet"
    code = main(["run", "--profile", "ci", *SMALL, "--op", "causal_conv1d", "--impl",
                 "tests.helpers:raising,torch_ref", "--output", str(out)])
    assert code == 1
    df = results.read_results([out])
    bad = df[df.impl == "tests.helpers:raising"]
    assert len(bad) == 8 and (bad.verdict == "error").all()
    assert bad.reason.str.contains("deliberate failure inside the implementation").all()
    assert df[df.impl == "torch_ref"].verdict.isin(("pass", "weak_yardstick")).all()


def test_ctrl_c_keeps_finished_items(capsys, tmp_path):
    out = tmp_path / "r.parquet"
    code = main(["run", "--profile", "ci", *SMALL, "--impl",
                 "causal_conv1d=tests.helpers:interrupt_on_third_call", "--output", str(out),
                 "--workers", "0"])  # in this process: the Ctrl-C reaches the run itself
    assert code == 130
    assert "interrupted: 2 of 8 items finished, kept" in capsys.readouterr().err
    df = results.read_results([out])
    assert len(df) == 2 and (df.verdict == "pass").all()


def test_module_entry_point_and_help():
    r = subprocess.run([sys.executable, "-m", "bwd_suite", "run", "--help"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "--profile" in r.stdout and "--include-mutants" in r.stdout
    r = subprocess.run([sys.executable, "-m", "bwd_suite", "run", "--profile", "x"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0


def test_prebuild_builds_the_chosen_op_and_names_bad_choices(capsys, monkeypatch):
    from bwd_suite.suite import registry

    built = []

    def fake(op, name, enabled=True):
        return registry.Implementation(
            op=op, name=name, fn=lambda **kw: None, kind="ours", enabled=enabled,
            disabled_reason="" if enabled else "no device", build=lambda: built.append(name))

    impls = [fake("layer_norm", "ln_a"), fake("layer_norm", "ln_off", enabled=False),
             fake("softmax", "sm_a")]
    monkeypatch.setattr(registry, "implementations",
                        lambda op=None: [i for i in impls if op in (None, i.op)])
    assert main(["prebuild", "--op", "layer_norm"]) == 0
    assert built == ["ln_a"]
    out = capsys.readouterr().out
    assert "layer_norm/ln_a: built" in out and "layer_norm/ln_off: skipped (no device)" in out
    assert "sm_a" not in out
    assert main(["prebuild", "--op", "layer_nrom"]) == 2
    _one_line_error(capsys, "--op", "layer_nrom", "layer_norm")
    assert main(["prebuild", "--op", "softmax", "--impl", "ln_a"]) == 2
    _one_line_error(capsys, "--impl", "no implementation of softmax with a build", "ln_a")
    assert built == ["ln_a"]


# ------------------------------------------------------------------ bad input (issue 24)

@pytest.mark.parametrize("argv, needles", [
    (["run", "--max-time", "nan"], ["--max-time", "must be a finite number, got nan"]),
    (["run", "--max-time", "inf"], ["--max-time", "finite number, got inf"]),
    (["run", "--warmup-ms", "nan"], ["--warmup-ms", "finite number, got nan"]),
    (["run", "--warmup-ms", "inf"], ["--warmup-ms", "finite number, got inf"]),
    (["run", "--item-timeout", "nan"], ["--item-timeout", "finite number, got nan"]),
    (["run", "--item-timeout=-inf"], ["--item-timeout", "finite number, got -inf"]),
])
def test_non_finite_numbers_exit_2(argv, needles, capsys, tmp_path):
    assert main(argv + ["--out", str(tmp_path)]) == 2
    _one_line_error(capsys, *needles)
    assert not list(tmp_path.iterdir())


def test_at_least_refuses_nan_where_comparisons_would_let_it_through():
    import argparse

    from bwd_suite.suite.cli import at_least
    from bwd_suite.suite.errors import SuiteInputError

    for above in (False, True):
        with pytest.raises(SuiteInputError, match="finite"):
            at_least(argparse.Namespace(x=float("nan")), "x", 0, above=above)
    at_least(argparse.Namespace(x=2**70), "x", 0)  # a huge int is finite: no overflow


def test_case_matching_nothing_blames_case_not_profile(capsys, tmp_path):
    assert main(["run", "--profile", "ci", "--op", "softmax", "--case", "causal_conv1d/bias/",
                 "--case", "zz", "--out", str(tmp_path)]) == 2
    _one_line_error(capsys, "error: --case:", "profile ci and op softmax",
                    "'causal_conv1d/bias/' or 'zz'")
    assert not list(tmp_path.iterdir())


def test_profile_without_cases_still_blames_profile(capsys, tmp_path):
    f = tmp_path / "perf_only.toml"
    f.write_text('op = "softmax"\n[[case]]\nname = "p"\ntags = ["perf"]\n')
    assert main(["run", "--cases", str(f), "--profile", "smoke", "--case", "softmax/p/",
                 "--out", str(tmp_path / "out")]) == 2
    _one_line_error(capsys, "error: --profile:", "'smoke'")


def _big_sweep(tmp_path, values: int):
    f = tmp_path / "big.toml"
    f.write_text('op = "softmax"\n[[sweep]]\nname = "huge"\ntags = ["smoke"]\n'
                 f"rows = {list(range(1, values + 1))}\nlength = {list(range(1, 101))}\n"
                 f"logit_scale = [1.0, 2.0, 4.0]\n")
    return f


def test_huge_sweep_refused_before_expansion(capsys, tmp_path):
    f = _big_sweep(tmp_path, 10_000)  # 3,000,000 combinations
    assert main(["list", "--cases", str(f)]) == 2
    _one_line_error(capsys, "big.toml", 'sweep "huge"', "3,000,000 combinations",
                    "100,000", "--allow-large")
    assert main(["run", "--cases", str(f), "--out", str(tmp_path / "out")]) == 2
    _one_line_error(capsys, 'sweep "huge"', "3,000,000")


def test_allow_large_lifts_the_sweep_limit(capsys, tmp_path, monkeypatch):
    from bwd_suite.suite import cases as cases_mod

    monkeypatch.setattr(cases_mod, "MAX_SWEEP", 299)
    f = _big_sweep(tmp_path, 1)  # 300 combinations
    assert main(["list", "--cases", str(f), "--op", "softmax"]) == 2
    _one_line_error(capsys, 'sweep "huge"', "300 combinations", "more than 299")
    assert main(["list", "--cases", str(f), "--op", "softmax", "--allow-large"]) == 0
    assert "      300" in capsys.readouterr().out


def test_allow_large_help_states_the_loader_limit():
    from bwd_suite.suite.cases import MAX_SWEEP

    r = subprocess.run([sys.executable, "-m", "bwd_suite", "list", "--help"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert f"more than {MAX_SWEEP:,} combinations" in " ".join(r.stdout.split())


def test_list_honours_impl(capsys):
    assert main(["list", "--device", "cpu", "--op", "softmax", "--impl", "torch_ref"]) == 0
    out = capsys.readouterr().out
    listed = [line.split()[0] for line in out.split("implementations", 1)[1].splitlines()[1:]
              if line.strip()]
    assert listed == ["softmax/torch_ref"]
    assert main(["list", "--impl", "torch_reff"]) == 2
    _one_line_error(capsys, "--impl", "'torch_reff' is not one of", "torch_ref")


def expected_all(op: str) -> list:
    """The case counts of `op` per profile, every case of the repository counted."""
    return [str(sum(c.op == op and c.in_profile(p) for c in load_cases())) for p in PROFILES]


def test_list_honours_case(capsys):
    assert main(["list", "--device", "cpu", "--case", "causal_conv1d/bias/", "--ids",
                 "--profile", "ci"]) == 0
    out = capsys.readouterr().out
    counts = out.split("cases per profile", 1)[1].split("implementations", 1)[0]
    rows = [line.split() for line in counts.splitlines()[2:] if line.strip()]
    bias = [c for c in load_cases() if c.id.startswith("causal_conv1d/bias/")]
    expected = [str(sum(c.in_profile(p) for c in bias)) for p in PROFILES]
    assert rows == [["causal_conv1d", *expected]], counts
    assert rows != [["causal_conv1d", *expected_all("causal_conv1d")]]
    ids = out.split("case ids in profile ci:", 1)[1].split()
    assert len(ids) == 8 and all(i.startswith("causal_conv1d/bias/") for i in ids)
    assert main(["list", "--case", "no-such-id"]) == 2
    _one_line_error(capsys, "--case", "'no-such-id'")


def _module(tmp_path, monkeypatch, name: str, source: str) -> str:
    (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


@pytest.mark.parametrize("source, needles", [
    ("x = 1 / 0\n", ["ZeroDivisionError", "division by zero"]),
    ("def f(:\n", ["SyntaxError"]),
    ("raise RuntimeError('line one\\nline two')\n", ["RuntimeError", "line one line two"]),
    ("import sys\nsys.exit(3)\n", ["SystemExit"]),
], ids=["zero-division", "syntax", "multi-line-message", "sys-exit"])
def test_impl_module_failing_at_import_is_one_line(source, needles, capsys, tmp_path,
                                                    monkeypatch):
    mod = _module(tmp_path, monkeypatch, f"bad_impl_{abs(hash(source))}", source)
    assert main(["run", "--op", "softmax", "--impl", f"{mod}:fn",
                 "--out", str(tmp_path / "out")]) == 2
    _one_line_error(capsys, "--impl", f"'{mod}:fn' cannot be imported", *needles)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("impl, needles", [
    ("tests.helpers:raising", ["'tests.helpers:raising' does not say which op",
                               "write OP=tests.helpers:raising",
                               "(ops: " + ", ".join(sorted(registry.ops())), "or give --op"]),
    ("softmx=tests.helpers:raising", ["'softmx' is not one of", "softmax"]),
    ("softmax=tests.helpers:layer_norm_only", ["registered as an implementation of "
                                               "layer_norm, not softmax"]),
])
def test_external_impl_must_say_its_op(impl, needles, capsys, tmp_path):
    assert main(["run", "--impl", impl, "--out", str(tmp_path)]) == 2
    _one_line_error(capsys, "--impl", *needles)
    assert not list(tmp_path.iterdir())


def test_op_and_impl_op_must_agree(capsys, tmp_path):
    for impl in ("softmax=tests.helpers:raising", "tests.helpers:layer_norm_only"):
        assert main(["run", "--op", "causal_conv1d", "--impl", impl, "--out",
                     str(tmp_path)]) == 2
        _one_line_error(capsys, "--impl", "not --op causal_conv1d")


def _plan(*argv):
    from bwd_suite.cli import build_parser
    from bwd_suite.suite.selection import select

    return select(build_parser().parse_args(["run", "--device", "cpu", *argv])).plan


def test_external_impl_runs_on_its_own_op_only_and_implies_it():
    plan = _plan("--profile", "ci", "--impl", "softmax=tests.helpers:raising,"
                 "tests.helpers:layer_norm_only,torch_ref")
    by_op = {}
    for entry in plan:
        by_op.setdefault(entry.spec.name, set()).update(
            (i.name, i.origin) for i in entry.impls)
    assert by_op["softmax"] == {("tests.helpers:raising", "softmax=tests.helpers:raising"),
                                ("torch_ref", "")}
    assert by_op["layer_norm"] == {
        ("tests_layer_norm_only", "layer_norm=tests.helpers:layer_norm_only"),
        ("torch_ref", "")}
    # the outside implementations are bound to softmax and layer_norm: no other op runs
    assert plan.ops() == ["layer_norm", "softmax"]


def test_plain_external_impl_takes_the_op_of_op():
    plan = _plan("--profile", "ci", "--op", "softmax", "--impl", "tests.helpers:raising")
    impls = {(i.op, i.name, i.origin): i for e in plan for i in e.impls}
    assert plan.ops() == ["softmax"] and len(impls) == 1
    (impl,) = impls.values()
    assert (impl.op, impl.kind, impl.origin) == ("softmax", "external",
                                                 "softmax=tests.helpers:raising")


def test_case_ending_in_a_dollar_picks_the_whole_id_alone():
    """A rerun command names its item by the whole id and `$`: never the ids extending it
    (adamw/features/n7.1000-fp32 is the head of three others)."""
    short = "adamw/features/n7.1000-fp32"
    longer = [c.id for c in load_cases(profile="nightly") if c.id.startswith(short)]
    assert len(longer) > 1  # the id is extended by others
    picked = [e.case.id for e in _plan("--profile", "nightly", "--impl", "torch_ref",
                                       "--case", short + "$")]
    assert picked == [short]
    assert len(list(_plan("--profile", "nightly", "--impl", "torch_ref", "--case",
                          short))) == len(longer)


# ------------------------------------------------------------- rerun commands (issue 40)

def _rerun_row(**columns):
    from bwd_suite.suite.outcomes import Verdict
    from bwd_suite.suite.rows import ResultRow

    base = dict(op="softmax", case_id="softmax/lengths/R13-N1-fp32",
                case_file="softmax/basic.toml", tags=["smoke", "ci"], impl="torch_ref",
                impl_kind="reference", device="cpu", profile="ci", det_repeats=3,
                timing_method="perf_counter")
    verdict = columns.pop("verdict", "fail")
    return ResultRow(**dict(base, **columns)).finish(Verdict(verdict), "dx mismatch")


def test_rerun_command_names_the_item_and_what_makes_it_the_same():
    from bwd_suite.suite.reproduce import rerun_command

    run = "python -m bwd_suite run --case 'softmax/lengths/R13-N1-fp32$'"
    assert rerun_command(_rerun_row()) == f"{run} --impl torch_ref --device cpu --profile ci"
    # checked untimed, with 2 repeats, in a --rerun-failed run (profile "rerun")
    assert rerun_command(_rerun_row(timing_method=None, det_repeats=2, profile="rerun",
                                    tags=["gpu"], device="cuda:1")) == (
        f"{run} --impl torch_ref --device cuda:1 --profile gpu --repeats 2 --no-timing")
    # an error's row cannot say whether the run timed: its command times
    assert "--no-timing" not in rerun_command(_rerun_row(timing_method=None, verdict="error"))
    # outside implementations keep their origin; a plain callable's name is its origin
    assert "--impl softmax=tests.helpers:raising " in rerun_command(
        _rerun_row(impl="tests.helpers:raising", impl_kind="external"))
    assert "--impl causal_conv1d=tests.helpers:known_bad " in rerun_command(
        _rerun_row(impl="tests_known_bad", impl_origin="causal_conv1d=tests.helpers:known_bad"))
    # a case file of the user's is named; the package's are found from any folder
    assert rerun_command(_rerun_row(case_file="mine/x.toml")).startswith(
        "python -m bwd_suite run --cases mine/x.toml --case ")
    assert rerun_command(_rerun_row(case_file="fuzz", profile="fuzz")) is None  # drawn


def test_rerun_command_reads_rows_as_the_reports_hold_them(tmp_path):
    import pandas as pd

    from bwd_suite.suite.reproduce import rerun_command

    path = tmp_path / "r.parquet"
    with results.ResultsWriter(path) as w:
        w.add(_rerun_row(timing_method=None))
    df = results.read_results([path])
    assert df.impl_origin.isna().all()
    for row in (next(df.itertuples()), df.iloc[0], df.iloc[0].to_dict()):
        assert rerun_command(row) == rerun_command(_rerun_row(timing_method=None))
    assert rerun_command(pd.Series({"op": "softmax"})) is None


def test_a_printed_rerun_command_reproduces_the_failure(capsys, tmp_path):
    """Run a mutant, take the command the summary prints under one failure, run it in a
    fresh process: the same item fails with the same reason. The command offered at the
    end reruns exactly the failures."""
    import shlex

    import pandas as pd

    out = tmp_path / "first.parquet"
    assert main(["run", "--device", "cpu", "--profile", "smoke", "--impl",
                 "torch_ref,mutant_softmax_dot_short", "--case", "softmax/lengths/R13-N7-",
                 "--repeats", "2", "--no-timing", "--workers", "0", "--quiet",
                 "--output", str(out)]) == 1
    printed = capsys.readouterr().out.splitlines()
    first = results.read_results([out])
    failed = first[first.verdict == "fail"]
    assert set(failed.impl) == {"mutant_softmax_dot_short"} and len(failed) == 3
    commands = [ln.strip()[len("rerun: "):] for ln in printed if ln.strip().startswith("rerun: ")]
    assert len(commands) == 3
    words = shlex.split(commands[1])
    assert words[:4] == ["python", "-m", "bwd_suite", "run"]
    again = tmp_path / "again.parquet"
    r = subprocess.run([sys.executable, *words[1:], "--output", str(again), "--quiet"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, r.stderr
    (row,) = results.read_results([again]).itertuples()
    want = failed.iloc[1]
    assert (row.case_id, row.impl, row.verdict, row.failure_kind, row.reason) == (
        want.case_id, want.impl, "fail", want.failure_kind, want.reason)
    assert (row.seed, row.det_repeats) == (want.seed, 2) and pd.isna(row.timing_method)
    assert r.stdout.splitlines()[-1].startswith("0 passed, 1 failed, 0 errors")

    offer = [ln for ln in printed if ln.startswith("rerun the 3 failing items: ")]
    assert offer and printed[-1].startswith("3 passed, 3 failed, 0 errors, 0 unsupported")
    words = shlex.split(offer[0].split(": ", 1)[1])
    assert words[:6] == ["python", "-m", "bwd_suite", "run", "--rerun-failed", str(out)]
    assert "--repeats" in words and "--no-timing" in words
    rerun = tmp_path / "rerun.parquet"
    assert main([*words[3:], "--workers", "0", "--quiet", "--output", str(rerun)]) == 1
    capsys.readouterr()
    assert sorted(results.read_results([rerun]).case_id) == sorted(failed.case_id)


def test_summary_prints_a_runs_summary_again_wider_or_whole(tmp_path, capsys):
    from bwd_suite.suite.outcomes import Verdict

    long = "dx mismatch: " + " ".join(f"w{i}" for i in range(60))
    # op "toy": no diagnosis hook in the registry to run over these fake rows
    rows = [_rerun_row(op="toy", case_id="softmax/lengths/R13-N7-fp32", timing_method=None)
            .finish(Verdict.FAIL, long),
            _rerun_row(op="toy", impl="tests_known_bad", case_file="mine/x.toml",
                       impl_origin="causal_conv1d=tests.helpers:known_bad", timing_method=None),
            _rerun_row(op="toy", case_id="softmax/lengths/R13-N1-fp16", verdict="pass")]
    path = tmp_path / "r.parquet"
    with results.ResultsWriter(path) as w:
        for r in rows:
            w.add(r)
    assert main(["summary", str(path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "1 passed, 2 failed, 0 errors, 0 unsupported, 0 known failures"
    assert out[-2] == (
        f"rerun the 2 failing items: python -m bwd_suite run --rerun-failed {path} "
        f"--cases mine/x.toml --cases {ROOT / 'cases'} "
        f"--impl causal_conv1d=tests.helpers:known_bad --device cpu")
    assert "        rerun: python -m bwd_suite run --case 'softmax/lengths/R13-N7-fp32$' " \
           "--impl torch_ref --device cpu --profile ci --no-timing" in out
    assert not any("dev time" in ln for ln in out) and long not in out[2]
    assert main(["summary", str(path), "--wide", "--full-reasons"]) == 1
    out = capsys.readouterr().out
    assert "dev time" in out and long in out
    with results.ResultsWriter(tmp_path / "ok.parquet") as w:
        w.add(rows[2])
    assert main(["summary", str(tmp_path / "ok.parquet")]) == 0
    assert "rerun the" not in capsys.readouterr().out
