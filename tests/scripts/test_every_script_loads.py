"""Every program under scripts/ loads on a CPU machine: those with a command line print their
help and exit 0, the others import (their `__main__` block not run). The GPU scripts run
only on the device, where an import renamed in the suite would otherwise surface first."""

import contextlib
import io
import runpy
import sys
from pathlib import Path

import pytest

SCRIPTS = sorted((Path(__file__).resolve().parents[2] / "scripts").glob("*.py"))


def test_the_scripts_are_found():
    assert len(SCRIPTS) >= 10


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_the_script_loads(path, monkeypatch):
    monkeypatch.syspath_prepend(str(path.parent))  # as `python3 scripts/x.py` puts it first
    if "argparse" not in path.read_text():
        runpy.run_path(str(path), run_name="loaded_by_test")
        return
    monkeypatch.setattr(sys, "argv", [str(path), "--help"])
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as e:
        runpy.run_path(str(path), run_name="__main__")
    assert e.value.code in (0, None), out.getvalue()
    assert "usage" in out.getvalue().lower()
