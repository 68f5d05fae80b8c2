"""PyTorch's pinned attention backends refuse cases when called: the item is unsupported
with PyTorch's stated reason, or, where PyTorch states none, with what the case has that
the backend is known to refuse (never an error)."""

import warnings

import pytest
import torch
from torch.nn.attention import SDPBackend

from bwd_suite.kernels.attention import sdpa
from bwd_suite.suite.registry import Unsupported

Q, KV = torch.randn(1, 4, 8, 16), torch.randn(1, 2, 8, 16)


def _refused(fn, backend):
    with pytest.raises(Unsupported) as e:
        sdpa._refusing([backend], fn, Q, KV, None)
    return str(e.value)


def test_pytorchs_stated_reason_is_kept_without_its_location_and_headers():
    def stated():
        warnings.warn("Flash attention kernel not used because: "
                      "(Triggered internally at /x/sdp_utils.cpp:988.)")
        warnings.warn("Flash attention requires q to be fp16. "
                      "(Triggered internally at /x/sdp_utils.cpp:2.)")
        raise RuntimeError("No available kernel. Aborting execution.")
    assert _refused(stated, SDPBackend.FLASH_ATTENTION) == \
        "No available kernel: Flash attention requires q to be fp16."


def test_a_silent_refusal_names_what_the_case_has_that_the_backend_refuses():
    def silent():
        warnings.warn("Memory efficient kernel not used because: "
                      "(Triggered internally at /x/sdp_utils.cpp:986.)")
        raise RuntimeError("No available kernel. Aborting execution.")
    why = _refused(silent, SDPBackend.EFFICIENT_ATTENTION)
    assert "PyTorch stated no reason" in why and "grouped-query heads" in why


def test_other_errors_are_not_refusals():
    def broken():
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
    with pytest.raises(RuntimeError, match="illegal memory access"):
        sdpa._refusing([SDPBackend.FLASH_ATTENTION], broken, Q, KV, None)
