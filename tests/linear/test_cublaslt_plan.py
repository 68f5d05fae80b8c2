"""The cuBLASLt plan of our linear backward (kernels/linear/csrc/linear_bwd_plan.cpp), without
a GPU or a cuBLAS header: tests/cuda/csrc/linear_plan_dump.cpp prints the plan of each
problem, and this test replays it on the CPU in float64 as cuBLAS would read it
(column-major operands at their leading dimensions, op(A) and op(B), the epilogues'
semantics from cublasLt.h: BIAS along D's rows, DGELU and DRELU multiplying D by the
derivative at the aux, RELU_AUX writing D > 0 as bits, BGRADA summing op(A) over k into m
values, BGRADB op(B) over k into n), then compares dx, dw, db with the golden. A plan that
puts an operand in the wrong order or transpose, an ld below its rows, a bias gradient on
the wrong operand or the derivative on the wrong GEMM fails here, for every storage of x,
w and dy, every activation in both positions, saved and recomputed."""

from __future__ import annotations

import itertools

import pytest
import torch

from bwd_suite.golden import linear as golden
from tests.golden_support import one_thread, rel_err  # noqa: F401 - fixture
from tests.linear.cublaslt_emulator import (F64, GXX, colmajor, elementwise, gemm,
                                            plan_dumper, stored, view)

ACTS = {"none": 0, "relu": 1, "gelu": 2, "gelu_tanh": 3, "silu": 4}

pytestmark = pytest.mark.skipif(GXX is None, reason="needs g++")


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    return plan_dumper(tmp_path_factory.mktemp("linear_plan"))


def replay(plan: dict, t: dict, p: dict, form: tuple) -> dict:
    M, N, K = p["m"], p["n"], p["k"]
    mem = {"x": stored(t["x"], p["x_t"]), "w": stored(t["w"], p["w_t"]),
           "dy": stored(t["dy"], p["dy_t"]), "bias": t["bias"].clone(),
           "db": torch.full((N,), float("nan"), dtype=F64)}
    if t["z"] is not None:
        mem["z"] = stored(t["z"], p["dy_t"])
    if t["a"] is not None:
        mem["a"] = stored(t["a"], p["x_t"])
    for name, numel in (("dx", M * K), ("dw", N * K)):
        mem[name] = torch.full((numel,), float("nan"), dtype=F64)
    for tmp in plan["temporaries"]:
        mem[tmp["tensor"]] = torch.full((tmp["rows"] * tmp["cols"],), float("nan"), dtype=F64)
    aux = plan["aux"]
    if aux["needed"] and not aux["copy_of_x"]:
        # what the preparation leaves: x at a padded ld (GELU), or its ReLU bitmask
        mem["aux"] = torch.zeros(aux["ld"] * aux["cols"], dtype=F64)
        if aux["bitmask"]:
            mask = plan["relu_mask"]
            r = mask["k"]
            mem["ident"] = torch.eye(r, dtype=F64).reshape(-1)
            mem["scratch"] = torch.zeros(mask["m"] * mask["n"], dtype=F64)
            gemm(mem, mask, form)
            assert mask["d"] == "scratch" and mask["aux"] == "aux"
        else:
            colmajor(mem["aux"], aux["rows"], aux["cols"], aux["ld"]).copy_(
                colmajor(mem["x"], aux["rows"], aux["cols"], aux["rows"]))
    for s in plan["steps"]:
        (gemm if s["kind"] == "gemm" else elementwise)(mem, s, form)
    out = {"dx": view(mem["dx"], dict(rows=M, cols=K, col_major=p["x_t"],
                                      ld=M if p["x_t"] else K)),
           "dw": view(mem["dw"], dict(rows=N, cols=K, col_major=p["w_t"],
                                      ld=N if p["w_t"] else K))}
    if p["bias"]:
        out["db"] = mem["db"]
    return out


def problem(M, N, K, act, act_at, bias, recompute, x_t, w_t, dy_t):
    return dict(m=M, n=N, k=K, act=act, act_at=act_at, bias=bias, recompute=recompute,
                x_t=x_t, w_t=w_t, dy_t=dy_t)


def line(p: dict) -> tuple:
    return (p["m"], p["n"], p["k"], ACTS[p["act"]], p["act_at"] == "input", p["bias"],
            p["recompute"], p["x_t"], p["w_t"], p["dy_t"], 2)


def form_of(act: str) -> tuple:
    return ("gelu", "tanh") if act == "gelu_tanh" else (act, "none")


def inputs(p: dict, seed: int) -> dict:
    g = torch.Generator().manual_seed(seed)
    M, N, K = p["m"], p["n"], p["k"]
    x, w, dy = (torch.randn(s, generator=g, dtype=F64) for s in ((M, K), (N, K), (M, N)))
    b = torch.randn(N, generator=g, dtype=F64)
    form, act = form_of(p["act"]), p["act"] != "none"
    saved = act and not p["recompute"]
    z = golden.preactivation(x, w, b if p["bias"] else None) \
        if saved and p["act_at"] == "output" else None
    a = golden.act(x, *form) if saved and p["act_at"] == "input" else None
    return {"x": x, "w": w, "dy": dy, "bias": b, "z": z, "a": a}


PROBLEMS = [problem(M, N, K, act, at, bias, rec, xt, wt, dyt)
            for (M, N, K) in ((7, 3, 5), (2, 9, 4))
            for act, at, bias, rec, xt, wt, dyt in itertools.product(
                ACTS, ("output", "input"), (True, False), (False, True),
                (False, True), (False, True), (False, True))
            if act != "none" or (at == "output" and not rec)]
PROBLEMS += [problem(M, N, K, "gelu_tanh", "input", True, False, xt, False, True)
             for (M, N, K) in ((1, 1, 1), (1, 7, 3), (33, 1, 17), (130, 3, 129))
             for xt in (False, True)]
PROBLEMS += [problem(M, N, K, "relu", at, True, True, True, True, False)
             for (M, N, K) in ((1, 1, 1), (129, 5, 2), (3, 130, 131)) for at in ("output", "input")]


def test_every_plan_replays_to_the_golden(plans):
    found = plans([line(p) for p in PROBLEMS])
    checked = 0
    for i, (p, plan) in enumerate(zip(PROBLEMS, found)):
        form = form_of(p["act"])
        if p["act_at"] == "input" and p["act"] in ("gelu", "silu"):
            assert plan["unsupported"] and not plan["steps"], p
            continue
        assert not plan["unsupported"], (p, plan["unsupported"])
        t = inputs(p, i)
        out = replay(plan, t, p, form)
        gold = golden.backward(t["x"], t["w"], t["dy"], bias=t["bias"] if p["bias"] else None,
                               z=t["z"], a=t["a"],
                               activation=form[0], approximate=form[1], act_at=p["act_at"],
                               has_bias=p["bias"])
        for name, ref in gold.items():
            assert rel_err(out[name], ref) < 1e-12, (name, p, plan)
        checked += 1
    assert checked > 400  # every storage x activation x position x saved or not


def test_epilogues_fuse_what_each_position_allows(plans):
    cases = [problem(37, 45, 29, act, at, True, rec, False, False, False)
             for act in ("relu", "gelu_tanh", "silu", "none") for at in ("output", "input")
             for rec in (False, True) if act != "none" or (at == "output" and not rec)]
    for p, plan in zip(cases, plans([line(p) for p in cases])):
        if plan["unsupported"]:
            assert p["act"] == "silu" and p["act_at"] == "input", p
            assert "SiLU" in plan["unsupported"]
            continue
        gemms = {s["name"]: s for s in plan["steps"] if s["kind"] == "gemm"}
        assert gemms["wgrad"]["epilogue"] in ("BGRADA", "BGRADB")  # db rides wgrad
        assert gemms["wgrad"]["bias"] == "db"
        if p["act_at"] == "input" and p["act"] != "none":
            assert plan["derivative"] == "epilogue"
            assert gemms["dgrad"]["epilogue"] == ("DRELU" if p["act"] == "relu" else "DGELU")
            assert not any(s["kind"] == "elementwise" and s["derivative"]
                           for s in plan["steps"])
        else:
            assert gemms["dgrad"]["epilogue"] == "DEFAULT"
            assert plan["derivative"] == ("none" if p["act"] == "none" else "elementwise")
        if p["recompute"] and p["act_at"] == "output":
            assert gemms["recompute_z"]["epilogue"] == "BIAS"
            assert plan["steps"][0]["name"] == "recompute_z"  # before the dact job
    erf = plans([line(problem(8, 8, 8, "gelu", "input", True, False, False, False, False))])
    assert "tanh form" in erf[0]["unsupported"]


def test_the_aux_follows_the_dgrad_output_and_is_padded_as_cublaslt_asks(plans):
    cases = [problem(16, 8, k, act, "input", False, False, xt, False, False)
             for k in (24, 29, 128) for act in ("relu", "gelu_tanh") for xt in (False, True)]
    for p, plan in zip(cases, plans([line(p) for p in cases])):
        aux, dgrad = plan["aux"], plan["steps"][0]
        assert (aux["rows"], aux["cols"]) == (dgrad["m"], dgrad["n"])
        assert aux["ld"] == dgrad["aux_ld"] and aux["ld"] >= aux["rows"]
        assert aux["ld"] % (128 if p["act"] == "relu" else 8) == 0
        # x itself is the GELU aux where its ld already is a multiple of 8
        assert aux["copy_of_x"] == (p["act"] == "gelu_tanh" and aux["rows"] % 8 == 0)


def test_elementwise_jobs_walk_their_output_in_memory_order(plans):
    # threads along the contiguous dimension (kernels/linear/csrc/linear_bwd.h's
    # walks_columns): walking a row-major dZ column by column ran at 0.2 TB/s on an H100
    cases = [problem(64, 48, 32, act, at, True, rec, xt, False, dyt)
             for act, at in (("gelu_tanh", "output"), ("relu", "input"))
             for rec in (False, True) for xt in (False, True) for dyt in (False, True)]
    seen = set()
    for p, plan in zip(cases, plans([line(p) for p in cases])):
        for s in (s for s in plan["steps"] if s["kind"] == "elementwise"):
            assert s["walks_columns"] == s["out"]["col_major"], (p, s)
            seen.add(s["out"]["col_major"])
    assert seen == {False, True}  # both orders planned
