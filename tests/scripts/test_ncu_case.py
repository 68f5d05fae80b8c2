"""scripts/ncu_case.py, the profiler launcher: it runs the named implementation on the
first matching case the asked number of times, and refuses unknown cases and
implementations, and unsupported pairs, with the reason."""

import importlib.util
from pathlib import Path

import pytest

from bwd_suite.suite.cases import load_cases
from bwd_suite.suite.errors import SuiteInputError

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "ncu_case.py"


@pytest.fixture()
def ncu_case():
    spec = importlib.util.spec_from_file_location("ncu_case", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_launches_the_implementation_on_the_case(ncu_case, monkeypatch, capsys):
    seen = []
    real = ncu_case.timed_call

    def counting(spec, impl, inputs, params):
        call = real(spec, impl, inputs, params)
        seen.append((impl.name, dict(params), tuple(inputs.tensors["x"].shape)))
        return lambda: (seen.append("call"), call())
    monkeypatch.setattr(ncu_case, "timed_call", counting)
    assert ncu_case.main(["--op", "layer_norm", "--impl", "torch_ref", "--case", "M13-N77-fp32",
                          "--launches", "3", "--device", "cpu"]) == 0
    name, params, shape = seen[0]
    case = next(c for c in load_cases(op="layer_norm") if "M13-N77-fp32" in c.id)
    assert (name, shape) == ("torch_ref", (13, 77)) and params == dict(case.params)
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


def _x(cat, name, ts, dur, corr=None):
    e = {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur}
    if corr is not None:
        e["args"] = {"correlation": corr}
    return e


def test_timeline_attributes_kernels_to_the_timed_calls(ncu_case):
    # a warm-up call, then two timed ones; each timed sample is flushed first (a fill kernel
    # launched outside the call's range); the call launches two kernels, the second through
    # the driver (as Triton does)
    trace = [_x("user_annotation", ncu_case.MARK, 0, 10),
             _x("cuda_runtime", "cudaLaunchKernel", 2, 1, corr=1), _x("kernel", "warm", 50, 5, 1)]
    for base, (d1, gap, d2) in ((100, (58.0, 2.0, 3.0)), (300, (60.0, 1.0, 4.0))):
        trace += [
            _x("cuda_runtime", "cudaLaunchKernel", base, 1, corr=base + 1),
            _x("kernel", "void at::native::vectorized_elementwise_kernel<4, FillFunctor<int>>(int)",
               base + 20, 30, base + 1),
            _x("user_annotation", ncu_case.MARK, base + 5, 10),
            _x("cuda_runtime", "cudaLaunchKernelExC", base + 6, 1, corr=base + 2),
            _x("kernel", "void (anonymous namespace)::ln_bwd_piped<float, float, 2, true, true>"
               "(LnBwdParams, int)", base + 60, d1, base + 2),
            _x("cuda_driver", "cuLaunchKernel", base + 8, 1, corr=base + 3),
            _x("kernel", "ln_bwd_cols<float>", base + 60 + d1 + gap, d2, base + 3),
        ]
    per = ncu_case.summarize(trace, samples=2)
    assert [[k[0] for k in p] for p in per] == [["ln_bwd_piped", "ln_bwd_cols"]] * 2
    lines = ncu_case.timeline_lines(per, events_us=[66.0, 68.0])
    assert lines[0] == "events 67.0 us over 2 samples"
    assert lines[1:4] == ["  ln_bwd_piped 59.0 us", "  gap 1.5 us", "  ln_bwd_cols 3.5 us"]
    # spans 63 and 65 us: 3 us of each call's events ran no kernel of the call
    assert lines[4] == "kernels' span 64.0 us; outside it, inside the events: 3.0 us"
    # samples that launched different kernels are reported, not averaged
    assert "differ" in ncu_case.timeline_lines([per[0], per[1][:1]], [1.0, 1.0])[0]


def test_timeline_needs_cuda(ncu_case):
    with pytest.raises(SuiteInputError, match="--timeline: times CUDA kernels"):
        ncu_case.main(["--op", "layer_norm", "--impl", "torch_ref", "--case", "M13-N77-fp32",
                       "--device", "cpu", "--timeline"])


@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs CUDA")
def test_timeline_on_the_gpu(ncu_case, capsys):
    """The real profiler trace (its categories and correlation ids) gives the call's own
    kernels: LayerNorm's torch_ref launches at least one, and each line has its time."""
    assert ncu_case.main(["--op", "layer_norm", "--impl", "torch_ref", "--case", "M13-N77-fp32",
                          "--timeline", "--samples", "3"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == out[1].split(" us over ")[0] + " us over 3 samples"
    kernels = [line for line in out[2:-1] if not line.startswith("  gap")]
    assert kernels and all(line.startswith("  ") and line.endswith(" us") for line in kernels)
    assert out[-1].startswith("kernels' span ")
