"""The suite catches each deliberately broken implementation on the default CI cases,
and the failing output is the one the planted bug damages."""

import pytest
import torch

from kernels.mutants.causal_conv1d import ALL
from suite import registry
from suite.cases import load_cases
from suite.roofline import Ceilings
from suite.runner import CaseContext, RunOptions, run_item

SPEC = registry.op("causal_conv1d")
CPU = torch.device("cpu")
CEIL = Ceilings(device_name="cpu", copy_gbps=None, copy_source="none", peak_tflops=None)
OPTS = RunOptions(device=CPU, golden_device=CPU, repeats=1, timing=False)

# mutant -> the output its bug must show up in
EXPECTED_OUTPUT = {
    "mutant_missing_right_halo": "dx",
    "mutant_halo_twice_in_dweight": "dweight",
    "mutant_missing_dfinal_path": "dx",
    "mutant_mask_crosses_boundary": "dx",
}


@pytest.fixture(scope="module")
def ci_cases():
    return load_cases(op="causal_conv1d", profile="ci")


@pytest.mark.parametrize("mutant", [f.implementation for f in ALL], ids=lambda i: i.name)
def test_mutant_is_caught_by_ci_cases(mutant, ci_cases):
    reference = registry.select_implementations("causal_conv1d", ["torch_tiled"])[0]
    assert mutant.kind == "mutant" and mutant.name in EXPECTED_OUTPUT
    for case in ci_cases:
        ctx = CaseContext(SPEC, case, OPTS)
        row = run_item(ctx, mutant, {}, CEIL, {})
        if row["verdict"] == "fail":
            # the same case passes without the planted bug: the failure is the bug's
            clean = run_item(ctx, reference, {}, CEIL, {})
            assert clean["verdict"] == "pass", clean["reason"]
            failing = {o["name"] for o in row["outputs"] if o["err"] > o["allowed"]}
            assert EXPECTED_OUTPUT[mutant.name] in failing, (case.id, row["reason"])
            return
    pytest.fail(f"{mutant.name} passed every ci case: the suite misses its bug")


def test_mutants_are_not_run_by_default():
    default = registry.select_implementations("causal_conv1d", None)
    assert not [i for i in default if i.kind == "mutant"]
