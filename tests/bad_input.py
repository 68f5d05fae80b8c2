"""The check every op's bad-input test makes: `python -m bwd_suite run` on a case file that
holds one bad key exits 2 with one line naming the file and the key."""

from bwd_suite import cli


def assert_one_line_naming_file_and_key(tmp_path, capsys, text: str, key: str, says: str):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    code = cli.main(["run", "--cases", str(path), "--device", "cpu", "--profile", "ci",
                     "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and "bad.toml" in err and f'"{key}"' in err, err
    assert says in err, err
