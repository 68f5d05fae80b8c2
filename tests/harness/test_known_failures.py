"""Known failures (Implementation.known_failures) become strict xfails in pytest: the
declared failure does not turn CI red, and a fixed implementation does (XPASS strict)."""

import subprocess
import sys
from pathlib import Path

from bwd_suite.suite import registry

ROOT = Path(__file__).resolve().parents[2]


def _pytest(impl: str):
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         "cases/causal_conv1d/basic.toml", "--suite-op", "causal_conv1d", "--suite-impl",
         f"tests.helpers:{impl}", "-k", "bias/", "--suite-device", "cpu"],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    return r.returncode, r.stdout.strip().splitlines()[-1]


def test_known_failure_is_an_expected_failure():
    code, last = _pytest("known_bad")
    assert code == 0, last
    assert "xfailed" in last and "failed" not in last.replace("xfailed", ""), last


def test_declared_failure_that_passes_fails_strictly():
    code, last = _pytest("known_good")
    assert code == 1, last
    assert "failed" in last, last


def test_known_failure_matches_case_id_substrings():
    impl = registry.select_implementations("softmax", ["liger"])[0]
    assert impl.known_failure("softmax/saturation/R13-N1000-fp16-ls30.0")
    assert impl.known_failure("softmax/saturation/R13-N1000-bf16-ls30.0") is None


def test_a_device_prefix_limits_a_known_failure_to_that_device():
    """`cpu:substring` holds on the CPU only: a failure of PyTorch's CPU kernel is not
    declared for its CUDA kernel (which would then pass unexpectedly)."""
    impl = registry.Implementation(
        op="softmax", name="x", fn=lambda **kw: None,
        known_failures={"cpu:softmax/big/": "16-bit sums on the CPU", "softmax/odd/": "both"})
    assert impl.known_failure("softmax/big/R1-N9", "cpu") == "16-bit sums on the CPU"
    assert impl.known_failure("softmax/big/R1-N9", "cuda") is None
    assert impl.known_failure("softmax/big/R1-N9") is None
    assert impl.known_failure("softmax/odd/R1-N9", "cuda") == "both"


def test_a_trailing_dollar_ends_the_case_id():
    """`id$` declares the one case whose id others extend (`-zero`, `-ams` suffixes),
    with or without a device prefix."""
    impl = registry.Implementation(
        op="adamw", name="x", fn=lambda **kw: None,
        known_failures={"cuda:adamw/f/n7-fp32$": "cuda only", "adamw/g/n7$": "anywhere"})
    assert impl.known_failure("adamw/f/n7-fp32", "cuda") == "cuda only"
    assert impl.known_failure("adamw/f/n7-fp32-zero", "cuda") is None
    assert impl.known_failure("adamw/f/n7-fp32", "cpu") is None
    assert impl.known_failure("adamw/g/n7", "cpu") == "anywhere"
    assert impl.known_failure("adamw/g/n71", "cpu") is None
