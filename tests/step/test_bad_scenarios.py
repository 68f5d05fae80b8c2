"""Bad scenario files and --impl values: `python -m bwd_suite step` exits 2 with one line
naming the file and the key (or the flag), before anything runs."""

import pytest

from bwd_suite import cli

HEAD = 'model = "mamba"\n[[scenario]]\nname = "bad"\ntags = ["ci"]\ndim = 8\nvocab = 16\n'


@pytest.mark.parametrize("extra, key, says", [
    ('impl = { nope = "torch_ref" }\n', "impl.nope", "calls no op 'nope'"),
    ('impl = { layer_norm = "nope" }\n', "impl.layer_norm", "has no implementation 'nope'"),
    ('impl = { linear = "cuda" }\n', "impl.linear", "has no implementation 'cuda'"),
    ("accumulation = 3\n", "accumulation", "3 micro-batches do not divide batch 4"),
    ('checkpoint = ["mlp"]\n', "checkpoint", "has no layer 'mlp' to checkpoint"),
    ('checks = ["float64", "sideways"]\n', "checks", "'sideways' is not one of"),
    ("dims = 8\n", "dims", "unknown key of a mamba scenario"),
    ("dtype = \"fp17\"\n", "dtype", "is not one of"),
    ('mask = "none"\nchecks = ["accumulation_mean"]\n', "mask", "cannot fail"),
    ("dropout = 0.1\nchecks = [\"accumulation\"]\n", "checks", "draws random numbers"),
    ("chunks = [10, 6]\n", "chunks", "leave no last chunk"),
])
def test_a_bad_key_exits_2_with_one_line_naming_file_and_key(tmp_path, capsys, extra, key,
                                                              says):
    path = tmp_path / "bad.toml"
    path.write_text(HEAD + extra)
    code = cli.main(["step", "--cases", str(path), "--device", "cpu", "--profile", "ci",
                     "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and "bad.toml" in err and f'key "{key}"' in err, err
    assert says in err, err
    assert not list(tmp_path.glob("*.parquet*"))  # refused before anything ran


def test_an_unknown_model_names_the_model_key(tmp_path, capsys):
    path = tmp_path / "bad.toml"
    path.write_text(HEAD.replace('"mamba"', '"rwkv"'))
    assert cli.main(["step", "--cases", str(path), "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip()
    assert 'bad.toml, key "model"' in err and "'rwkv' is not one of" in err, err


@pytest.mark.parametrize("impl, says", [
    ("layer_norm=nope", "op layer_norm has no implementation 'nope'"),
    ("sideways=torch_ref", "no op 'sideways'"),
    ("layer_norm", "expected OP=NAME"),
])
def test_a_bad_impl_flag_exits_2(tmp_path, capsys, impl, says):
    code = cli.main(["step", "--device", "cpu", "--impl", impl, "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "--impl" in err and says in err, err


def test_the_command_writes_rows_that_summary_reads_and_names_the_rerun(tmp_path, capsys):
    """A passing run exits 0 and its rows read back; a failing one exits 1 and prints, per
    failing check, the `step` command that reruns its scenario with the same choice."""
    from bwd_suite.suite import results

    ok = tmp_path / "ok.parquet"
    assert cli.main(["step", "--device", "cpu", "--scenario", "step/transformer-tiny-fp32$",
                     "--no-timing", "--output", str(ok)]) == 0
    rows = results.read_rows([ok])
    assert {r.case_id for r in rows} == {f"step/transformer-tiny-fp32/{c}" for c in (
        "float64", "loss", "checkpoint", "offload", "accumulation", "accumulation_mean",
        "overflow")}
    assert all(r.op == "step" and r.impl == "eager" and r.case_file ==
               "scenarios/transformer.toml" for r in rows)
    assert cli.main(["summary", str(ok)]) == 0
    capsys.readouterr()
    bad = tmp_path / "bad.parquet"
    assert cli.main(["step", "--device", "cpu", "--scenario", "step/transformer-tiny-fp32$",
                     "--no-timing", "--impl", "attention=mutant_attn_dk_dv_swapped",
                     "--output", str(bad)]) == 1
    out = capsys.readouterr().out
    assert ("rerun: python -m bwd_suite step --scenario 'step/transformer-tiny-fp32$' --impl "
            "attention=mutant_attn_dk_dv_swapped --device cpu --profile smoke") in out
