"""Two-phase implementations: an untimed `prepare` (a forward saving what the backward
needs), then the backward alone, checked and timed; what the forward saved is a column."""

import json

import torch

from bwd_suite.cli import main
from bwd_suite.suite import results
from bwd_suite.suite.calls import saved_bytes
from bwd_suite.suite.opspec import CaseInputs
from tests.faults import two_phase

RUN = ["run", "--profile", "ci", "--op", "softmax", "--case", "softmax/rows-boundaries/", "--quiet",
       "--device", "cpu", "--workers", "0"]


def _run(tmp_path, impl, *extra):
    out = tmp_path / "r.parquet"
    code = main([*RUN, "--impl", f"softmax=tests.faults.two_phase:{impl}", *extra,
                 "--output", str(out)])
    return code, results.read_results([out])


def _items(df):
    return df[df.impl.str.contains("two_phase")]


def test_a_two_phase_implementation_passes_and_reports_the_bytes_its_forward_saved(
        tmp_path, capsys):
    code, df = _run(tmp_path, "good", "--no-timing")
    df = _items(df)
    assert code == 0 and len(df) > 0 and (df.verdict == "pass").all(), list(df.reason)[:2]
    for _, row in df.iterrows():  # y in fp64, whatever y's dtype; y itself is not counted
        p = json.loads(row.params_json)
        assert row.saved_bytes == 8 * p["rows"] * p["length"], (row.case_id, row.saved_bytes)


def test_the_timed_call_is_the_backward_alone(tmp_path, capsys):
    two_phase.CALLS.update(prepare=0, backward=0)
    code, df = _run(tmp_path, "good", "--repeats", "3",
                    "--samples", "7")
    df = _items(df)
    assert code == 0 and len(df) > 0 and df.time_median_s.notna().all()
    # per item: one forward for the checks and one for the timing, whatever the samples
    assert two_phase.CALLS["prepare"] == 2 * len(df)
    assert two_phase.CALLS["backward"] >= len(df) * (3 + 7)


def test_an_autograd_graph_kept_by_prepare_is_counted_in_saved_bytes():
    y = torch.softmax(torch.randn(4, 33), -1)
    inputs = CaseInputs({"y": y, "dy": torch.randn(4, 33), "mask": None}, {"scale": None})
    saved = two_phase.graph.prepare(**inputs.tensors, **inputs.attrs)
    # x (fp32 4 x 33) and the softmax result z the graph keeps: both new storages
    assert saved_bytes(saved, inputs) == 2 * 4 * 33 * 4
    # a tensor that is one of the case's inputs costs nothing
    assert saved_bytes({"y": y, "view": y[1:]}, inputs) == 0
    dx = two_phase.graph(**inputs.tensors, **inputs.attrs, saved=saved)["dx"]
    y64 = y.double()
    want = y64 * (inputs.tensors["dy"].double()
                  - (inputs.tensors["dy"].double() * y64).sum(-1, keepdim=True))
    torch.testing.assert_close(dx.double(), want, rtol=1e-4, atol=1e-5)


def test_an_output_computed_once_and_handed_back_is_stale(tmp_path, capsys):
    code, df = _run(tmp_path, "stale", "--no-timing", "--repeats", "2")
    df = _items(df)
    assert code == 1 and len(df) > 0
    assert (df.failure_kind == "stale output").all(), list(df.reason)[:2]
    assert df.reason.str.contains(r"stale output: a repeat returned \['dx'\]").all()


def test_an_output_of_the_wrong_dtype_is_an_error_naming_it(tmp_path, capsys):
    code, df = _run(tmp_path, "wrong_dtype", "--no-timing", "--repeats", "1")
    df = _items(df)
    low = df[~df.params_json.str.contains('"float32"')]
    assert code == 1 and len(low) > 0 and (low.verdict == "error").all()
    assert low.reason.str.contains("returned dx as").all()


def test_a_case_the_library_refuses_when_called_is_unsupported_with_its_reason(
        tmp_path, capsys):
    code, df = _run(tmp_path, "refuses", "--repeats", "1")
    df = _items(df)
    assert code == 0 and len(df) > 0 and (df.verdict == "unsupported").all()
    assert df.reason.str.contains("No available kernel").all()


def test_a_two_phase_object_whose_backward_cannot_take_saved_is_refused(capsys):
    code = main([*RUN, "--impl", "softmax=tests.faults.two_phase:Good", "--no-timing"])
    assert code == 2


def test_batch_invariance_is_reported_and_sees_a_position_dependent_result(tmp_path, capsys):
    """attention declares a reordering (the batch reversed): the fp32 tiled model is
    mostly bitwise invariant (on the CPU a few tiny shapes are not: the reordered copies
    sit at other addresses, likely taking other vector paths of the BLAS); one that
    nudges every batch row but the first never is."""
    out = tmp_path / "r.parquet"
    code = main(["run", "--profile", "ci", "--op", "attention", "--case", "attention/lengths/",
                 "--no-timing", "--repeats", "1", "--quiet", "--device", "cpu",
                 "--workers", "0", "--impl",
                 "torch_tiled,attention=tests.faults.batch_position:nudged",
                 "--output", str(out)])
    df = results.read_results([out])
    assert code == 0 and len(df) > 0
    tiled, nudged = df[df.impl == "torch_tiled"], df[df.impl.str.endswith(":nudged")]
    assert tiled.batch_invariant.notna().all() and tiled.batch_invariant.astype(bool).mean() > 0.8
    assert len(nudged) and not nudged.batch_invariant.astype(bool).any()
