"""scripts/ncu_case.py, the profiler launcher: it runs the named implementation on the
first matching case the asked number of times, and refuses unknown cases and
implementations, and unsupported pairs, with the reason."""

import importlib.util
from pathlib import Path

import pytest

from suite.errors import SuiteInputError

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "ncu_case.py"


@pytest.fixture()
def ncu_case():
    spec = importlib.util.spec_from_file_location("ncu_case", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_launches_the_implementation_on_the_case(ncu_case, monkeypatch, capsys):
    seen = []
    real = ncu_case._timed_call

    def counting(spec, impl, ctx):
        call = real(spec, impl, ctx)
        seen.append((impl.name, ctx.case.id, tuple(ctx.inputs.tensors["x"].shape)))
        return lambda: (seen.append("call"), call())
    monkeypatch.setattr(ncu_case, "_timed_call", counting)
    assert ncu_case.main(["--op", "layer_norm", "--impl", "torch_ref", "--case", "M13-N77-fp32",
                          "--launches", "3", "--device", "cpu"]) == 0
    name, case_id, shape = seen[0]
    assert (name, shape) == ("torch_ref", (13, 77)) and "M13-N77-fp32" in case_id
    assert seen[1:] == ["call"] * 3
    assert "3 launches of layer_norm/torch_ref" in capsys.readouterr().out


@pytest.mark.parametrize("args,match", [
    (["--op", "layer_norm", "--impl", "torch_ref", "--case", "no-such-case"], "no layer_norm case"),
    (["--op", "layer_norm", "--impl", "nope", "--case", "M13-N77"], "is not one of"),
    (["--op", "layer_norm", "--impl", "liger", "--case", "M13-N77"], "does not run"),
])
def test_refuses_with_the_reason(ncu_case, args, match):
    with pytest.raises(SuiteInputError, match=match):
        ncu_case.main(args + ["--device", "cpu"])
