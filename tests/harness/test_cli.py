"""The command line: bad input exits 2 with one line before anything runs; errors inside
an implementation are recorded and the run goes on; Ctrl-C keeps finished rows."""

import subprocess
import sys
from pathlib import Path

import pytest

from suite import results
from suite.cli import main

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
    (["run", "--case", "no-such-case-id"], ["no cases"]),
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
    assert (ran.verdict == "pass").all()
    assert ran.time_median_s.notna().all() and (ran.timing_method == "perf_counter").all()
    assert ran.gbps.notna().all() and ran.frac_copy_bw.notna().all()
    # GPU-only implementations are recorded as unsupported on a CPU, with the reason
    gpu_only = df[df.impl.isin(["cuda", "dao"])]
    assert (gpu_only.verdict == "unsupported").all() and gpu_only.reason.str.len().gt(0).all()


def test_raising_implementation_is_recorded_and_the_run_continues(capsys, tmp_path):
    out = tmp_path / "r.parquet"
    code = main(["run", "--profile", "ci", *SMALL, "--impl",
                 "tests.helpers:raising,torch_ref", "--output", str(out)])
    assert code == 1
    df = results.read_results([out])
    bad = df[df.impl == "tests.helpers:raising"]
    assert len(bad) == 8 and (bad.verdict == "error").all()
    assert bad.reason.str.contains("deliberate failure inside the implementation").all()
    assert (df[df.impl == "torch_ref"].verdict == "pass").all()


def test_ctrl_c_keeps_finished_items(capsys, tmp_path):
    out = tmp_path / "r.parquet"
    code = main(["run", "--profile", "ci", *SMALL, "--impl",
                 "tests.helpers:interrupt_on_third_call", "--output", str(out)])
    assert code == 130
    assert "interrupted: 2 finished items kept" in capsys.readouterr().err
    df = results.read_results([out])
    assert len(df) == 2 and (df.verdict == "pass").all()


def test_module_entry_point_and_help():
    r = subprocess.run([sys.executable, "-m", "suite", "run", "--help"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "--profile" in r.stdout and "--include-mutants" in r.stdout
    r = subprocess.run([sys.executable, "-m", "suite", "run", "--profile", "x"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0


def test_prebuild_builds_the_chosen_op_and_names_bad_choices(capsys, monkeypatch):
    from suite import registry

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
