"""Bad input is refused before any work with exit 2 and one line: sizes no device holds,
devices the suite does not run on, numbers beyond sane maxima, non-finite thresholds,
outputs that cannot be written, an outside implementation whose module kills the process
that imports it or whose signature cannot take its op's inputs. And an implementation
bound to an op implies that op."""

import pytest

from bwd_suite.suite import registry, results
from bwd_suite.cli import main

SMALL = ["--profile", "ci", "--op", "softmax", "--no-timing", "--repeats", "1", "--quiet",
         "--device", "cpu", "--workers", "0"]


def _one_line_exit_2(capsys, argv, *needles):
    code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    assert len(err) == 1 and err[0].startswith("error: "), err
    for n in needles:
        assert n in err[0], (n, err[0])
    return err[0]


@pytest.mark.parametrize("argv, needles", [
    (["run", "--repeats", "99999999999999999999"], ["--repeats", "at most"]),
    (["run", "--samples", "10000000"], ["--samples", "at most"]),
    (["run", "--warmup-ms", "1e12"], ["--warmup-ms", "at most"]),
    (["run", "--max-time", "inf"], ["--max-time", "finite"]),
    (["run", "--workers", "100000"], ["--workers", "at most"]),
    (["run", "--threads", "-1"], ["--threads", "at least"]),
    (["run", "--item-timeout", "1e300"], ["--item-timeout", "at most"]),
    (["run", "--golden-device", "meta"], ["--golden-device", "cpu or cuda"]),
    (["run", "--device", "meta"], ["--device", "cpu or cuda"]),
    (["fuzz", "--op", "softmax", "--impl", "torch_ref", "--budget", "10000000000"],
     ["--budget", "at most"]),
    (["fuzz", "--op", "softmax", "--impl", "torch_ref", "--time", "10", "--shrink-time",
      "10"], ["--shrink-time", "less than --time"]),
    (["compare", "a", "b", "--factor", "inf"], ["--factor", "finite"]),
    (["compare", "a", "b", "--factor", "nan"], ["--factor", "finite"]),
    (["compare", "a", "b", "--max-lines", "100000000000"], ["--max-lines", "at most"]),
    (["report", "a", "--factor", "inf"], ["--factor", "finite"]),
    (["report", "a", "--max-cases", "0"], ["--max-cases", "at least"]),
])
def test_out_of_range_options_are_refused(argv, needles, capsys, tmp_path):
    out = ["--out", str(tmp_path)] if argv[0] in ("run", "fuzz") else []
    _one_line_exit_2(capsys, argv + out, *needles)
    assert not list(tmp_path.iterdir())


def test_an_output_that_cannot_be_written_is_one_line(capsys):
    _one_line_exit_2(capsys, ["run", *SMALL, "--output", "/proc/x.parquet"], "--output",
                     "/proc")
    _one_line_exit_2(capsys, ["report", "nothing.parquet", "--output", "/proc/r.html"],
                     "--output", "/proc")


def test_a_case_whose_tensors_exceed_the_device_is_refused_naming_file_and_case(
        tmp_path, capsys):
    f = tmp_path / "huge.toml"
    f.write_text('op = "softmax"\n[[case]]\nname = "typo"\ntags = ["ci"]\n'
                 'rows = 100000000000\n')
    line = _one_line_exit_2(capsys, ["run", "--cases", str(f), "--profile", "ci",
                                     "--device", "cpu", "--out", str(tmp_path)],
                            "huge.toml", "softmax/typo/", "GB")
    assert "more than" in line
    assert not list(tmp_path.glob("*.parquet*"))


@pytest.mark.parametrize("how, words", [
    ("segfault", "kills the process with SIGSEGV"),
    ("exit", "ends the process"),
])
def test_an_impl_module_that_kills_its_importer_is_reported(how, words, capsys, tmp_path,
                                                            monkeypatch):
    monkeypatch.setenv("BWD_SUITE_FAULT", how)
    monkeypatch.setattr(registry, "_PROBED", {})
    _one_line_exit_2(capsys, ["run", *SMALL, "--impl",
                              "softmax=tests.faults.parent_import:fn", "--out",
                              str(tmp_path)], "--impl", "tests.faults.parent_import", words)


def test_an_impl_whose_signature_cannot_take_the_ops_inputs_is_refused(capsys, tmp_path):
    _one_line_exit_2(capsys, ["run", *SMALL[:-2], "--op", "layer_norm", "--impl",
                              "layer_norm=tests.faults.signatures:softmax_bwd", "--out",
                              str(tmp_path)],
                     "--impl", "cannot take the inputs of layer_norm", "'y'")


def test_an_implementation_bound_to_an_op_implies_that_op(capsys, tmp_path):
    out = tmp_path / "r.parquet"
    code = main(["run", "--profile", "smoke", "--no-timing", "--repeats", "1", "--quiet",
                 "--device", "cpu", "--workers", "0", "--impl",
                 "softmax=tests.faults.signatures:softmax_bwd,torch_ref", "--output",
                 str(out)])
    df = results.read_results([out])
    assert code in (0, 1) and len(df) > 0
    assert set(df.op) == {"softmax"}  # torch_ref of the other ops did not run
    assert set(df.impl) == {"tests.faults.signatures:softmax_bwd", "torch_ref"}
