"""Ours' Python side (kernels/linear/cuda.py) end to end on the CPU: the extension is
replaced by a stand-in that takes the real plan (the plan dumper) and emulates each step
in float64 on the very tensors ours hands it (tests/linear/cublaslt_emulator.py), rounding
what each step writes to the dtype as the GPU would. So the problem ours describes, the
temporaries it allocates in the plan's storage, the padded GELU aux and the ReLU bitmask
it prepares, the tensors it names and the outputs it returns are checked through the
runner against the golden, with the facts it reports; and a refusal or a failure of the
extension becomes an unsupported or an error item with its message."""

from __future__ import annotations

import json
from types import MappingProxyType

import pytest
import torch

from bwd_suite.kernels.linear import cuda as ours
from bwd_suite.suite import registry
from bwd_suite.suite.cases import Case
from bwd_suite.suite.registry import Implementation
from bwd_suite.suite.roofline import Ceilings
from bwd_suite.suite.runner import CaseContext, RunOptions, run_item
from tests.golden_support import one_thread  # noqa: F401 - fixture
from tests.linear.cublaslt_emulator import F64, GXX, elementwise, gemm, plan_dumper

pytestmark = pytest.mark.skipif(GXX is None, reason="needs g++")
SPEC = registry.op("linear")
CPU = torch.device("cpu")
FORMS = {0: ("none", "none"), 1: ("relu", "none"), 2: ("gelu", "none"), 3: ("gelu", "tanh"),
         4: ("silu", "none")}
BITS = 2 ** torch.arange(8)


def memory(t: torch.Tensor) -> torch.Tensor:
    """A dense tensor's elements in memory order, as float64."""
    return t.as_strided((t.numel(),), (1,)).to(F64)


def unpack(mask: torch.Tensor) -> torch.Tensor:
    return ((mask.to(torch.int64)[:, None] >> torch.arange(8)) & 1).reshape(-1).to(F64)


def check_matrix(name: str, t: torch.Tensor, rows: int, cols: int, col_major: bool):
    """What the binding checks (linear_bwd_binding.cpp): shape, and the strides of every
    dimension longer than 1 against the plan's storage."""
    assert tuple(t.shape) == (rows, cols), (name, tuple(t.shape), rows, cols)
    want = (1, rows) if col_major else (cols, 1)
    for d in range(2):
        assert t.shape[d] == 1 or t.stride(d) == want[d], (name, t.stride(), want)


def check_tensors(prob, plan: dict, tensors: dict) -> None:
    M, N, K = prob[:3]
    x_t, w_t, dy_t = prob[7:10]
    shapes = {"x": (M, K, x_t), "a": (M, K, x_t), "dx": (M, K, x_t), "w": (N, K, w_t),
              "dw": (N, K, w_t), "dy": (M, N, dy_t), "z": (M, N, dy_t)}
    shapes.update({m["tensor"]: (m["rows"], m["cols"], m["col_major"])
                   for m in plan["temporaries"]})
    for name, t in tensors.items():
        if name in shapes:
            check_matrix(name, t, *shapes[name])
        elif name in ("bias", "db"):
            assert t.shape == (N,) and t.is_contiguous(), name


class StandIn:
    """The extension's three functions, on the CPU."""

    def __init__(self, dump):
        self.dump = dump
        self.answer = None  # a status to return instead of running

    def plan(self, prob):
        d = self.dump([prob])[0]
        aux = dict(d["aux"])
        if aux["bitmask"]:
            g = d["relu_mask"]
            aux.update(identity=g["k"], scratch_rows=g["m"], scratch_cols=g["n"])
        steps = [f"{s['name']} {s['epilogue']}" if s["kind"] == "gemm"
                 else f"{s['name']} elementwise" for s in d["steps"]]
        return {"unsupported": d["unsupported"], "derivative": d["derivative"],
                "temporaries": d["temporaries"], "steps": steps, "aux": aux}

    def relu_mask(self, prob, tensors, workspace):
        d = self.dump([prob])[0]
        g = d["relu_mask"]
        mem = {k: memory(v) for k, v in tensors.items() if k != "aux"}
        mem["aux"] = torch.zeros(d["aux"]["ld"] * d["aux"]["cols"], dtype=F64)
        gemm(mem, g, None)
        packed = (mem["aux"].view(-1, 8).to(torch.int64) * BITS).sum(1).to(torch.uint8)
        tensors["aux"].copy_(packed)
        return {"status": "ok", "message": "", "facts": {"relu_mask_epilogue": g["epilogue"]}}

    def run(self, prob, tensors, workspace):
        if self.answer:
            return self.answer
        d = self.dump([prob])[0]
        check_tensors(prob, d, tensors)
        mem = {k: memory(v) for k, v in tensors.items() if k != "aux"}
        if "aux" in tensors:
            mem["aux"] = unpack(tensors["aux"]) if d["aux"]["bitmask"] else memory(tensors["aux"])
        facts = {"derivative": d["derivative"]}
        for s in d["steps"]:
            if s["kind"] == "gemm":
                gemm(mem, s, FORMS[prob[3]])
                written = [s["d"]] + ([s["bias"]] if s["epilogue"].startswith("BGRAD") else [])
                facts[f"{s['name']}_epilogue"] = s["epilogue"]
            else:
                elementwise(mem, s, FORMS[prob[3]])
                written = [s["out"]["tensor"]]
            for name in written:  # stored in the dtype, read back as stored
                t = tensors[name]
                t.as_strided((t.numel(),), (1,)).copy_(mem[name][:t.numel()])
                mem[name] = memory(t)
        return {"status": "ok", "message": "", "facts": facts}


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory):
    return StandIn(plan_dumper(tmp_path_factory.mktemp("linear_plan")))


def run(stand_in, monkeypatch, **kw):
    monkeypatch.setattr(ours, "extension", lambda: stand_in)
    p = dict(SPEC.params.defaults(), m=37, n=45, k=29)
    p.update(kw)
    case = Case(op="linear", group="t", id="linear/t/x", tags=frozenset({"ci"}),
                params=MappingProxyType(p), seed=6, file="<test>")
    ceil = Ceilings(device_name="cpu", copy_gbps=None, copy_source="none", peak_tflops=None)
    opts = RunOptions(device=CPU, golden_device=CPU, repeats=2, timing=False)
    impl = Implementation(op="linear", name="cublaslt_on_cpu", fn=ours.cublaslt,
                          prepare=ours.prepare, supports=ours._supports, deterministic=False)
    return run_item(CaseContext(SPEC, case, opts), impl, None, ceil, {})


@pytest.mark.parametrize("kw, facts", [
    (dict(activation="gelu", approximate="tanh", act_at="input"),
     {"aux": "x padded", "dgrad_epilogue": "DGELU", "wgrad_epilogue": "BGRADB"}),
    (dict(activation="gelu", approximate="tanh", act_at="input", k=32, x_t=True, m=40),
     {"aux": "x", "dgrad_epilogue": "DGELU"}),
    (dict(activation="relu", act_at="input", recompute=True, w_t=True, dtype="float32"),
     {"aux": "relu bitmask", "relu_mask_epilogue": "RELU_AUX", "dgrad_epilogue": "DRELU",
      "wgrad_epilogue": "BGRADA"}),
    (dict(activation="silu", recompute=True, dy_t=True, dtype="float16"),
     {"derivative": "elementwise", "recompute_z_epilogue": "BIAS"}),
    (dict(activation="gelu", dtype="float32", x_t=True, w_t=True),
     {"derivative": "elementwise", "dgrad_epilogue": "DEFAULT"}),
    (dict(bias=False, m=1, k=7), {"derivative": "none", "wgrad_epilogue": "DEFAULT"}),
])
def test_ours_through_a_cpu_stand_in_of_the_extension_passes(stand_in, monkeypatch, kw, facts):
    row = run(stand_in, monkeypatch, **kw)
    assert row.verdict == "pass", row.reason
    got = json.loads(row.impl_facts_json)
    assert facts.items() <= got.items(), got


def test_a_refusal_or_failure_of_the_extension_is_said(stand_in, monkeypatch):
    stand_in.answer = {"status": "unsupported", "facts": {},
                       "message": "cuBLASLt's heuristic has no algorithm for dgrad (DGELU)"}
    try:
        row = run(stand_in, monkeypatch, activation="gelu", approximate="tanh", act_at="input")
        assert row.verdict == "unsupported" and "no algorithm for dgrad" in row.reason
        stand_in.answer = {"status": "error", "facts": {},
                           "message": "cublasLtMatmul failed: cuBLAS status 7"}
        row = run(stand_in, monkeypatch)
        assert row.verdict == "error" and "cublasLtMatmul failed" in row.reason, row.reason
    finally:
        stand_in.answer = None
    row = run(stand_in, monkeypatch, activation="silu", act_at="input")
    assert row.verdict == "unsupported" and "SiLU" in row.reason
