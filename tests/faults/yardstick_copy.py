"""The causal conv1d yardstick's arithmetic under another name: a plain callable that an
outside `--impl causal_conv1d=tests.faults.yardstick_copy:conv1d` loads, for
tests/harness/test_weak_yardstick.py (the same arithmetic must get the same verdicts)."""

from bwd_suite.kernels.causal_conv1d.torch_ref import torch_ref


def conv1d(**kw):
    """kernels/causal_conv1d/torch_ref.torch_ref, called as it is"""
    torch_ref(**kw)
