"""Each verdict rule, shown on small deliberately wrong implementations of the real op."""

from types import MappingProxyType

import pytest
import torch

from bwd_suite.kernels.causal_conv1d.torch_ref import torch_ref
from bwd_suite.suite import registry, tolerances
from bwd_suite.suite.cases import Case
from bwd_suite.suite.inputs import is_poison, poison_
from bwd_suite.suite.opspec import TolClass
from bwd_suite.suite.registry import Implementation
from bwd_suite.suite.roofline import Ceilings
from bwd_suite.suite.runner import CaseContext, RunOptions, run_case, run_item
from bwd_suite.suite.verdicts import Determinism, classify_determinism

SPEC = registry.op("causal_conv1d")
CPU = torch.device("cpu")
CEIL = Ceilings(device_name="cpu", copy_gbps=None, copy_source="none", peak_tflops=None)


def make_case(**overrides) -> Case:
    params = dict(SPEC.params.defaults(), dim=16, seqlen=40, dtype="float32",
                  initial_states=True, final_states=True, **overrides)
    return Case(op="causal_conv1d", group="t", id="causal_conv1d/t/x", tags=frozenset({"ci"}),
                params=MappingProxyType(params), seed=1234, file="<test>")


def impl(fn, name="under_test", **kw) -> Implementation:
    return Implementation(op="causal_conv1d", name=name, fn=fn, kind="external", **kw)


def run(fn, case=None, repeats=2, **kw) -> dict:
    case = case or make_case()
    opts = RunOptions(device=CPU, golden_device=CPU, repeats=repeats, timing=False)
    ctx = CaseContext(SPEC, case, opts)
    return run_item(ctx, impl(fn, **kw), None, CEIL, {})


def correct(**kw):
    torch_ref(**kw)


def test_correct_implementation_passes():
    row = run(correct)
    assert row.verdict == "pass", row.reason
    assert {o["name"] for o in row.outputs} == {"dx", "dweight", "dbias", "dinitial_states"}
    assert all(o["err"] <= o["allowed"] for o in row.outputs)


def test_wrong_value_fails_with_location():
    def wrong(out, **kw):
        torch_ref(out=out, **kw)
        out["dx"][1, 5, 17] += 0.5 * out["dx"].abs().max()

    row = run(wrong)
    assert row.verdict == "fail"
    assert row.failure_kind == "mismatch"
    assert "dx mismatch" in row.reason and "[1, 5, 17]" in row.reason
    dx = next(o for o in row.outputs if o["name"] == "dx")
    assert dx["n_bad"] == 1 and dx["worst_index"] == "[1, 5, 17]"


def test_small_reduction_error_fails():
    """dweight off by 1% of its largest element fails although dx is right."""
    def off(out, **kw):
        torch_ref(out=out, **kw)
        out["dweight"][3, 0] += 0.01 * out["dweight"].abs().max()

    row = run(off)
    assert row.verdict == "fail" and "dweight mismatch" in row.reason


def test_computed_nan_fails_as_nonfinite():
    def nan(out, **kw):
        torch_ref(out=out, **kw)
        out["dbias"][2] = float("nan")

    row = run(nan)
    assert row.verdict == "fail"
    assert row.failure_kind == "non-finite output"
    assert "dbias" in row.reason


def test_unwritten_element_fails_as_unwritten_output():
    def lazy(out, **kw):
        full = {k: torch.empty_like(v) for k, v in out.items()}
        torch_ref(out=full, **kw)
        for k, v in out.items():
            if k == "dx":
                v[..., :-1].copy_(full[k][..., :-1])  # the last time step is never written
            else:
                v.copy_(full[k])

    row = run(lazy)
    assert row.verdict == "fail"
    assert row.failure_kind == "unwritten output"
    assert "unwritten output dx" in row.reason
    dx = next(o for o in row.outputs if o["name"] == "dx")
    assert dx["n_unwritten"] == 2 * 16  # batch x dim elements of the last step


def test_accumulating_into_unset_output_is_caught():
    def accumulates(out, **kw):
        full = {k: torch.empty_like(v) for k, v in out.items()}
        torch_ref(out=full, **kw)
        for k, v in out.items():
            v.add_(full[k])  # assumes zeros

    row = run(accumulates)
    assert row.verdict == "fail"
    assert row.failure_kind in ("unwritten output", "non-finite output")


def test_writing_into_an_input_fails_and_later_items_see_clean_inputs():
    def scribbles(x, out, **kw):
        torch_ref(x=x, out=out, **kw)
        x.mul_(2)

    case = make_case()
    opts = RunOptions(device=CPU, golden_device=CPU, repeats=1, timing=False)
    rows = list(run_case(SPEC, case, [impl(scribbles, "scribbles"), impl(correct, "clean")],
                         opts, None, CEIL))
    assert rows[0].verdict == "fail"
    assert rows[0].failure_kind == "input modified"
    assert "['x']" in rows[0].reason
    assert rows[1].verdict == "pass", rows[1].reason


def test_raising_implementation_is_an_error_and_the_run_goes_on():
    def boom(**kw):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    case = make_case()
    opts = RunOptions(device=CPU, golden_device=CPU, repeats=1, timing=False)
    rows = list(run_case(SPEC, case, [impl(boom, "boom"), impl(correct, "ok")], opts, None, CEIL))
    assert rows[0].verdict == "error"
    assert "RuntimeError: CUDA error: an illegal memory access" in rows[0].reason
    assert rows[1].verdict == "pass"


def test_unsupported_feature_is_recorded_not_run():
    calls = []

    def never(**kw):
        calls.append(1)

    row = run(never, supports=lambda p: "width > 4" if p["width"] > 4 else None,
              case=make_case(width=5))
    assert row.verdict == "unsupported" and row.reason == "width > 4"
    assert not calls


def test_gpu_only_implementation_is_unsupported_on_cpu():
    row = run(correct, devices=("cuda",))
    assert row.verdict == "unsupported" and "cuda" in row.reason


def _noisy(scale):
    def fn(out, **kw):
        torch_ref(out=out, **kw)
        out["dweight"].add_(torch.randn_like(out["dweight"]) * scale
                            * out["dweight"].abs().max())
    return fn


def test_determinism_bitwise_for_a_deterministic_implementation():
    row = run(correct, repeats=4)
    assert row.determinism == "bitwise" and row.det_repeats == 4


def test_determinism_nondeterministic_within_tolerance():
    row = run(_noisy(1e-7), repeats=3, deterministic=False)
    assert row.determinism == "nondeterministic"
    assert 0 < row.det_spread < 1e-5
    assert row.verdict == "pass"


def test_claimed_determinism_must_be_bitwise():
    row = run(_noisy(1e-7), repeats=3, deterministic=True)
    assert row.determinism == "nondeterministic"
    assert row.verdict == "fail" and row.failure_kind == "nondeterministic"
    assert "claims bitwise" in row.reason


def test_determinism_fail_beyond_tolerance():
    row = run(_noisy(1e-1), repeats=3, deterministic=False)
    assert row.determinism == "fail"
    assert row.verdict == "fail"


def test_classifier_on_synthetic_repeats():
    g = {"a": torch.linspace(-1, 1, 100, dtype=torch.float64)}
    first = {"a": g["a"].float()}
    same = {"a": first["a"].clone()}
    near = {"a": first["a"] + 1e-7}
    far = {"a": first["a"] + 0.5}
    allowed = {"a": 1e-5}
    assert classify_determinism(first, [same, same], g, allowed).result is Determinism.BITWISE
    r = classify_determinism(first, [same, near], g, allowed)
    assert r.result is Determinism.NONDETERMINISTIC and r.spread == pytest.approx(1e-7, rel=0.5)
    assert classify_determinism(first, [far], g, allowed).result is Determinism.FAIL
    assert classify_determinism(first, [], g, allowed).result is Determinism.NOT_CHECKED
    # -0.0 and 0.0 compare equal as numbers but are different bits
    z = {"a": torch.zeros(3)}
    nz = {"a": -torch.zeros(3)}
    r = classify_determinism(z, [nz], {"a": torch.zeros(3, dtype=torch.float64)}, {"a": 0.0})
    assert r.result is Determinism.NONDETERMINISTIC


def test_tolerance_rule_is_k_times_yardstick_plus_floor_under_ceiling():
    eps32 = torch.finfo(torch.float32).eps
    t = tolerances.TOLERANCES[TolClass.ELEMENTWISE]
    assert tolerances.allowed_error(TolClass.ELEMENTWISE, torch.float32, torch.float32, 1e-6) \
        == pytest.approx(t.k * 1e-6 + t.floor_ulps * eps32)
    # the yardstick itself is held to the ceiling however poor it is
    assert tolerances.allowed_error(TolClass.ELEMENTWISE, torch.bfloat16, torch.bfloat16, 1.0,
                                    from_yardstick=True) == tolerances.CEILINGS[torch.bfloat16]
    for cls, tol in tolerances.TOLERANCES.items():
        assert tol.reason, cls


@pytest.mark.parametrize("cls", list(TolClass))
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_a_weak_yardstick_does_not_loosen_the_bound(cls, dtype):
    """A 16-bit yardstick worse than fp32 with one rounding (a 16-bit accumulation): the
    others' bound is k x that fp32 error, not k x the yardstick's; 2 ulps of the output
    are allowed where the yardstick would have allowed the ceiling."""
    eps = torch.finfo(dtype).eps
    fp32 = tolerances.fp32_error(cls, dtype)
    assert eps < fp32 < 2 * eps
    weak = 4 * eps  # a dgamma summed in 16-bit over many rows
    assert tolerances.weak_yardstick(cls, dtype, dtype, weak)
    allowed = tolerances.allowed_error(cls, dtype, dtype, weak)
    assert allowed < 5 * eps < tolerances.CEILINGS[dtype]
    assert allowed == pytest.approx(tolerances.allowed_error(cls, dtype, dtype, fp32))
    # the yardstick's own item keeps its own error; an fp32 output never counts as weak
    assert tolerances.allowed_error(cls, dtype, dtype, weak, from_yardstick=True) > 7 * eps
    assert not tolerances.weak_yardstick(cls, torch.float32, torch.float32, 1e-3)
    # a 16-bit case's fp32 output (LayerNorm's dgamma): weak against fp32 itself
    assert tolerances.weak_yardstick(cls, torch.float32, dtype, 1e-3)


def test_the_ceiling_never_sits_below_the_conditioning():
    """An ill-conditioned case: what no fp32 computation can beat is not a failure."""
    cond = 0.5
    for dtype in (torch.float32, torch.bfloat16):
        assert tolerances.allowed_error(TolClass.ELEMENTWISE, dtype, dtype, 1.0, cond,
                                        from_yardstick=True) >= cond


def test_outputs_in_the_subnormal_range_are_held_to_its_spacing():
    """fp16 values near 5e-6 are subnormals spaced 2^-24 apart: rounding the exact result
    once (a correct kernel) errs up to half of that, 0.6% of the largest value, three times
    fp16's relative ulp. It passes; twice that spacing's floor does not."""
    from bwd_suite.suite.opspec import OutputSpec
    from bwd_suite.suite.verdicts import check_output
    gen = torch.Generator().manual_seed(0)
    golden = (torch.rand(4096, generator=gen, dtype=torch.float64) + 0.5) * 3.3e-6
    rounded = golden.to(torch.float16)
    spec = OutputSpec("dx", TolClass.ELEMENTWISE)
    ok = check_output(spec, rounded, golden, 0.0, torch.float16)
    assert ok.err > 2 * torch.finfo(torch.float16).eps  # beyond the relative floor alone
    assert ok.failure is None, ok
    step = torch.finfo(torch.float16).smallest_normal * torch.finfo(torch.float16).eps
    wrong = (golden + 3 * step).to(torch.float16)
    assert check_output(spec, wrong, golden, 0.0, torch.float16).failure is not None


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16])
def test_poison_is_a_nan_that_computation_does_not_produce(dtype):
    t = poison_(torch.empty(4, 3, dtype=dtype).t())
    assert torch.isnan(t).all() and is_poison(t).all()
    assert not is_poison(torch.full((3,), float("nan"), dtype=dtype)).any()
    assert not is_poison(torch.zeros(3, dtype=dtype) / 0 * 0).any()


def test_allowance_includes_the_conditioning_term():
    """Ill-conditioned case (huge SiLU pre-activations): the allowance grows with the
    golden's sensitivity to one fp32 rounding of the inputs, as the table says."""
    row = run(correct, case=make_case(x_scale=1000.0))
    for o in row.outputs:
        assert o["cond_err"] > 0
        cls = TolClass(o["tol_class"])
        t = tolerances.TOLERANCES[cls]
        out_dtype = torch.float32
        expected = min(t.k * o["ref_err"] + t.floor_ulps * torch.finfo(out_dtype).eps
                       + t.floor_fp32_ulps * torch.finfo(torch.float32).eps
                       + tolerances.COND_FACTOR * o["cond_err"],
                       tolerances.ceiling(cls, out_dtype, torch.float32, o["cond_err"]))
        assert o["allowed"] == pytest.approx(expected), o["name"]
    calm = run(correct, case=make_case(x_scale=1.0))
    cond = {o["name"]: o["cond_err"] for o in calm.outputs}
    dx = next(o for o in row.outputs if o["name"] == "dx")
    assert dx["cond_err"] > 2 * cond["dx"]  # large inputs are worse conditioned


@pytest.mark.parametrize("kind", ["mismatch", "nonfinite", "unwritten", "list"])
def test_the_sliced_comparison_gives_what_the_whole_one_does(monkeypatch, kind):
    # outputs too large for one float64 pass are compared in slices of CHUNK elements;
    # every metric, the worst index and the first unwritten element must not depend on it
    from bwd_suite.suite import verdicts
    from bwd_suite.suite.opspec import OutputSpec

    g = torch.linspace(-3, 5, 1000, dtype=torch.float64).reshape(10, 100)
    a = g.to(torch.bfloat16)
    a.view(-1)[[37, 512, 513]] += torch.tensor([0.5, -0.75, 0.75], dtype=torch.bfloat16)
    if kind == "nonfinite":
        a.view(-1)[[640, 900]] = float("inf")
    if kind == "unwritten":
        poison_(a.view(-1)[[700, 701, 999]])
    args = ([a[:3], a[3:]], [g[:3], g[3:]]) if kind == "list" else (a, g)
    spec = OutputSpec("x", TolClass.ELEMENTWISE)
    whole = verdicts.check_output(spec, *args, 1e-3, torch.bfloat16)
    monkeypatch.setattr(verdicts, "CHUNK", 7)
    sliced = verdicts.check_output(spec, *args, 1e-3, torch.bfloat16)
    got, want = sliced.as_row(), whole.as_row()
    assert got.keys() == want.keys()
    for k in want:  # pytest.approx takes no strings (the worst index) since pytest 9.2
        if isinstance(want[k], float):
            assert got[k] == pytest.approx(want[k], rel=1e-12, nan_ok=True), k
        else:
            assert got[k] == want[k], k
    assert sliced.message == whole.message and sliced.failure == whole.failure
    assert whole.failure is not None  # each kind is a failure the slices must find too
    assert verdicts.normalized_error(*args) == whole.err or kind != "mismatch"


def test_the_ceiling_never_sits_below_two_subnormal_spacings():
    """An fp16 output of 8e-6 (PyTorch's cross entropy dlogits at V = 1 with z-loss) has
    subnormal neighbours 6e-8 apart, 0.72% of it: a same-dtype computation rounding twice
    there errs 1.5 spacings, over the 1% cap, and is not wrong; 3 spacings still fail."""
    step = torch.finfo(torch.float16).smallest_normal * torch.finfo(torch.float16).eps
    scale = 8.26e-6
    cap = tolerances.ceiling(TolClass.ELEMENTWISE, torch.float16, torch.float16, 0.0, scale)
    assert cap >= 2 * step / scale > tolerances.CEILINGS[torch.float16]
    assert tolerances.allowed_error(TolClass.ELEMENTWISE, torch.float16, torch.float16,
                                    1.5 * step / scale, from_yardstick=True,
                                    scale=scale) >= 1.5 * step / scale
    assert cap < 3 * step / scale
    # a normal-range output keeps the dtype's cap
    assert tolerances.ceiling(TolClass.ELEMENTWISE, torch.float16, torch.float16, 0.0,
                              1.0) == tolerances.CEILINGS[torch.float16]
