"""A CPU stand-in for cuBLASLt and our elementwise kernels, for the tests of the linear
plan (test_cublaslt_plan.py) and of ours' Python side (test_cublaslt_emulated.py): the
plan dumper (tests/cuda/csrc/linear_plan_dump.cpp, built with g++), and each step replayed
in float64 on flat memory as cuBLAS reads it (column-major operands at their leading
dimensions, op(A) and op(B), the epilogues' semantics from cublasLt.h: BIAS along D's
rows, DGELU and DRELU multiplying D by the derivative at the aux, RELU_AUX writing D > 0
as bits, BGRADA summing op(A) over k into m values, BGRADB op(B) over k into n)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import torch

from bwd_suite.golden import linear as golden

ROOT = Path(__file__).resolve().parents[2]
GXX = shutil.which("g++")
F64 = torch.float64


def plan_dumper(where: Path):
    """Build the dumper; returns run(problems) -> plans (dicts), problems as tuples of
    m n k act act_at bias recompute x_t w_t dy_t elem_bytes."""
    exe = where / "dump"
    r = subprocess.run([GXX, "-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror",
                        str(ROOT / "tests/cuda/csrc/linear_plan_dump.cpp"),
                        str(ROOT / "kernels/linear/csrc/linear_bwd_plan.cpp"), "-o", str(exe)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]

    def run(problems):
        lines = [" ".join(str(int(v)) for v in pb) for pb in problems]
        out = subprocess.run([str(exe)], input="\n".join(lines) + "\n", capture_output=True,
                             text=True, timeout=120, check=True).stdout.splitlines()
        assert len(out) == len(lines)
        return [json.loads(o) for o in out]
    return run


def colmajor(mem: torch.Tensor, rows: int, cols: int, ld: int) -> torch.Tensor:
    """The (rows x cols) column-major matrix at `ld` in flat memory (a writable view)."""
    assert ld >= max(rows, 1), f"leading dimension {ld} below {rows} rows"
    assert mem.numel() >= ld * (cols - 1) + rows, "operand runs past its memory"
    return mem[:ld * cols].view(cols, ld)[:, :rows].t() if cols else mem[:0].view(0, rows).t()


def view(mem: torch.Tensor, m: dict) -> torch.Tensor:
    """An op's matrix ({rows, cols, col_major, ld}) in its memory."""
    if m["col_major"]:
        return colmajor(mem, m["rows"], m["cols"], m["ld"])
    return mem[:m["rows"] * m["ld"]].view(m["rows"], m["ld"])[:, :m["cols"]]


def stored(t: torch.Tensor, col_major: bool) -> torch.Tensor:
    return (t.t() if col_major else t).contiguous().reshape(-1).clone()


def gemm(mem: dict, g: dict, form: tuple) -> None:
    m, n, k = g["m"], g["n"], g["k"]
    a = colmajor(mem[g["a"]], *((k, m) if g["trans_a"] else (m, k)), g["lda"])
    b = colmajor(mem[g["b"]], *((n, k) if g["trans_b"] else (k, n)), g["ldb"])
    op_a, op_b = (a.t() if g["trans_a"] else a), (b.t() if g["trans_b"] else b)
    d = op_a @ op_b
    e = g["epilogue"]
    if e == "BIAS":
        d = d + mem[g["bias"]][:m, None]
    elif e == "DGELU":
        d = d * golden.act_grad(colmajor(mem[g["aux"]], m, n, g["aux_ld"]), "gelu", "tanh")
    elif e == "DRELU":
        d = d * colmajor(mem[g["aux"]], m, n, g["aux_ld"])  # the bits, as 0 and 1
    elif e == "RELU_AUX":
        colmajor(mem[g["aux"]], m, n, g["aux_ld"]).copy_((d > 0).to(F64))
        d = d.clamp_min(0)
    elif e == "BGRADA":
        mem[g["bias"]][:m] = op_a.sum(1)
    elif e == "BGRADB":
        mem[g["bias"]][:n] = op_b.sum(0)
    else:
        assert e == "DEFAULT", e
    colmajor(mem[g["d"]], m, n, g["ldd"]).copy_(d)


def elementwise(mem: dict, s: dict, form: tuple) -> None:
    inp = view(mem[s["in"]["tensor"]], s["in"])
    if s["derivative"]:
        value = view(mem[s["grad"]["tensor"]], s["grad"]) * golden.act_grad(inp, *form)
    else:
        value = golden.act(inp, *form)
    view(mem[s["out"]["tensor"]], s["out"]).copy_(value)


