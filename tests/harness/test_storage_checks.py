"""Outputs must be written into the storage the harness handed out: an implementation that
gives the same tensor object other storage (`.data =`, `.set_()`) has not written the
buffer a caller passed it, and fails as `output replaced`; so does an in-place
implementation (Liger's way: dlogits into the logits) that swaps the logits' storage."""

import pytest
import torch

from bwd_suite.suite import results
from bwd_suite.cli import main
from bwd_suite.suite.calls import storage_signature

BIAS = ["--profile", "ci", "--case", "causal_conv1d/bias/", "--no-timing", "--repeats", "1",
        "--quiet", "--device", "cpu", "--workers", "0"]


@pytest.mark.parametrize("impl", ["swaps_storage", "sets_storage"])
def test_an_output_given_other_storage_is_replaced_and_its_buffer_unwritten(
        impl, tmp_path, capsys):
    out = tmp_path / "r.parquet"
    code = main(["run", *BIAS, "--impl", f"causal_conv1d=tests.faults.misbehaving:{impl}",
                 "--output", str(out)])
    df = results.read_results([out])
    assert code == 1 and len(df) == 8
    assert (df.verdict == "fail").all() and (df.failure_kind == "output replaced").all()
    assert df.reason.str.contains("output replaced, not written").all()
    assert df.reason.str.contains("unwritten output dx").all()  # the buffer handed out


def test_an_in_place_implementation_that_swaps_the_logits_storage_fails(tmp_path, capsys):
    out = tmp_path / "r.parquet"
    code = main(["run", "--profile", "ci", "--op", "cross_entropy", "--case",
                 "cross_entropy/features/", "--no-timing", "--repeats", "1", "--quiet",
                 "--device", "cpu", "--workers", "0",
                 "--impl", "cross_entropy=tests.faults.in_place:swaps_logits",
                 "--output", str(out)])
    df = results.read_results([out])
    assert code == 1 and len(df) > 0
    assert (df.failure_kind == "output replaced").all(), list(df.reason)[:2]
    assert df.reason.str.contains("output replaced, not written").all()


def test_the_storage_signature_sees_what_the_python_object_hides():
    t = torch.zeros(4, 3)
    before = storage_signature(t)
    same = t.view(4, 3)
    assert storage_signature(same) == before  # a view of the same elements
    t.data = torch.zeros(4, 3)
    assert storage_signature(t) != before
    u = torch.zeros(4, 3)
    sig = storage_signature(u)
    u.set_(torch.zeros(12).view(4, 3))
    assert storage_signature(u) != sig
    v = torch.zeros(4, 3)
    sig = storage_signature(v)
    v.resize_(3, 4)
    assert storage_signature(v) != sig

