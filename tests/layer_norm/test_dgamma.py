"""The four dgamma/dbeta strategies of seed 002 (kernels/layer_norm/dgamma_strategies.py,
csrc/dgamma_strategies.cu): registration, determinism claims and reasons on any machine;
the [32][32] / [32][33] shared layouts as compiled (nvcc, no GPU needed); on a GPU, every
strategy against a float64 sum, bitwise repeats of the deterministic ones, and the
registered implementations through the suite's own verdicts."""

import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import MappingProxyType

import pytest
import torch

from bwd_suite.kernels.layer_norm import dgamma_strategies as dg
from bwd_suite.suite import registry
from bwd_suite.suite.cases import Case
from bwd_suite.suite.roofline import Ceilings
from bwd_suite.suite.runner import CaseContext, RunOptions, run_item

ROOT = Path(__file__).resolve().parents[2]

SPEC = registry.op("layer_norm")
IMPLS = {i.name: i for i in registry.implementations("layer_norm")}
NAMES = ("cuda_dg_column", "cuda_dg_atomic", "cuda_dg_tile32", "cuda_dg_tile32_pad")
CSRC = Path(dg.__file__).resolve().parent / "csrc"
NVCC = shutil.which("nvcc")
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def _case(device, **params):
    p = dict(SPEC.params.defaults(), **params)
    case = Case(op="layer_norm", group="t", id="layer_norm/t/dgamma", tags=frozenset({"ci"}),
                params=MappingProxyType(p), seed=7, file="<test>")
    return CaseContext(SPEC, case, RunOptions(device=device, golden_device=device,
                                              repeats=3, timing=False))


def _run(ctx, name):
    ceil = Ceilings(device_name=str(ctx.opts.device), copy_gbps=None, copy_source="none",
                    peak_tflops=None)
    return run_item(ctx, IMPLS[name], None, ceil, IMPLS)


# ---------------------------------------------------------------- any machine

def test_four_strategies_registered_with_their_determinism_claims():
    assert {n: IMPLS[n].deterministic for n in NAMES} == {
        "cuda_dg_column": True, "cuda_dg_atomic": False, "cuda_dg_tile32": True,
        "cuda_dg_tile32_pad": True}
    for n in NAMES:
        impl = IMPLS[n]
        assert (impl.kind, impl.devices, impl.build) == ("ours", ("cuda",), dg.build)
        assert impl.doc.startswith("dgamma/dbeta: ")
        assert impl.enabled == torch.cuda.is_available()
        assert getattr(dg, n).implementation is impl  # --impl module:NAME finds it
    docs = {n: IMPLS[n].doc for n in NAMES}
    assert len(set(docs.values())) == 4
    assert "[32][32]" in docs["cuda_dg_tile32"] and "[32][33]" in docs["cuda_dg_tile32_pad"]


def test_strategy_numbers_match_the_cuda_enum():
    header = (CSRC / "dgamma_strategies.h").read_text()
    enum = dict(re.findall(r"\b(k\w+) = (\d+),", header))
    assert {k: int(v) for k, v in enum.items()} == {
        "kColumnPerThread": 0, "kAtomic": 1, "kTile32": 2, "kTile32Padded": 3}
    assert [row[1] for row in dg.STRATEGIES] == [0, 1, 2, 3]
    assert [row[0] for row in dg.STRATEGIES] == list(NAMES)


def test_affine_only_and_skipped_with_a_reason_without_cuda():
    p = SPEC.params.defaults()
    for n in NAMES:
        impl = IMPLS[n]
        assert impl.supports(p) is None
        assert impl.supports(dict(p, affine=False)) == "dgamma strategies need affine"
        assert impl.unsupported_reason(p, "cpu") == (
            "no CUDA device here" if not impl.enabled else "runs on cuda only, not cpu")
    if torch.cuda.is_available():
        pytest.skip("the no-CUDA reason only shows on a machine without CUDA")
    ctx = _case(torch.device("cpu"), rows=5, hidden=33)
    for n in NAMES:
        row = _run(ctx, n)
        assert (row.verdict, row.reason) == ("unsupported", "no CUDA device here")


def test_tile_kernels_differ_only_in_the_padded_row():
    """Source: kTile32 launches the tile kernel with kPad 0 and kTile32Padded with kPad 1,
    and kPad is the only padding of the shared buffer."""
    src = (CSRC / "dgamma_strategies.cu").read_text()
    assert "__shared__ float buf[2][kTile][kTile + kPad];" in src
    assert re.search(r"case DgammaStrategy::kTile32:\s*dg_tile<T, W, 0>", src)
    assert re.search(r"case DgammaStrategy::kTile32Padded:\s*dg_tile<T, W, 1>", src)
    assert "float g = buf[0][tx][ty], b = buf[1][tx][ty];" in src  # the transposed read


@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
def test_compiled_shared_layouts_and_two_blocks_per_sm(tmp_path):
    """ptxas: each (c1) tile kernel holds 2 x 32 x 32 floats of shared memory, each (c2)
    2 x 32 x 33; the 1024-thread kernels fit 32 registers (two blocks per SM, as the grid
    sizing assumes)."""
    r = subprocess.run([NVCC, "-c", "-std=c++17", "-O3", "--use_fast_math",
                        "-gencode=arch=compute_90,code=sm_90", "-Xptxas", "-v",
                        str(CSRC / "dgamma_strategies.cu"), "-o", str(tmp_path / "k.o")],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    kernels = re.findall(r"Compiling entry function '(\w+)'.*?Used (\d+) registers,(.*?)\n",
                         r.stderr, re.S)
    smem = {}
    for name, regs, rest in kernels:
        m = re.search(r"(\d+) bytes smem", rest)
        kind = re.search(r"(dg_\w+?)I", name).group(1)
        if kind == "dg_tile":
            pad = re.search(r"Li([01])EEEv", name).group(1)
            smem.setdefault(pad, set()).add(int(m.group(1)) if m else 0)
        if kind in ("dg_tile", "dg_atomic"):
            assert int(regs) <= 32, (name, regs)
    assert smem == {"0": {2 * 32 * 32 * 4}, "1": {2 * 32 * 33 * 4}}
    assert sum(1 for k in kernels if "dg_tile" in k[0]) == 2 * 9  # x and w dtypes, both pads


# ---------------------------------------------------------------- GPU

def _inputs(rows, n, dtype, strided):
    gen = torch.Generator(device="cuda").manual_seed(rows * 7919 + n)
    cols = n + 3 if strided else n  # row stride != n
    x = (torch.randn(rows, cols, device="cuda", generator=gen) + 3).to(dtype)[:, :n]
    dy = torch.randn(rows, cols, device="cuda", generator=gen).to(dtype)[:, :n]
    x64 = x.double()
    mean = x64.mean(1)
    rstd = (x64.var(1, unbiased=False) + 1e-5).rsqrt()
    return x, dy, mean.float(), rstd.float()


def _float64_sums(x, dy, mean, rstd):
    """dgamma, dbeta and the sums of the terms' magnitudes, from the fp32 statistics."""
    t = dy.double() * ((x.double() - mean.double()[:, None]) * rstd.double()[:, None])
    d = dy.double()
    return t.sum(0), d.sum(0), t.abs().sum(0), d.abs().sum(0)


def _strategy(s, x, dy, mean, rstd, wdtype):
    n = x.shape[1]
    dgam = torch.full((n,), float("nan"), device="cuda", dtype=wdtype)
    dbet = torch.full((n,), float("nan"), device="cuda", dtype=wdtype)
    dg._ext().dgamma(s, x, dy, mean, rstd, dgam, dbet)
    return dgam, dbet


def _bits(t):
    return t.view(torch.int32 if t.dtype == torch.float32 else torch.int16)


# rows x n x fp32/bf16 x with fp32 gamma, and gamma in x's dtype on two shapes
SHAPES = [(rows, n, dt, torch.float32) for rows in (1, 33, 4097) for n in (1, 31, 1024, 4099)
          for dt in (torch.float32, torch.bfloat16)]
SHAPES += [(4097, 4099, torch.bfloat16, torch.bfloat16), (33, 1024, torch.float16, torch.float16)]
_SHORT = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}


@needs_cuda
@pytest.mark.parametrize("rows,n,dtype,wdtype", SHAPES,
                         ids=[f"M{m}-N{n}-{_SHORT[d]}-w{_SHORT[w]}" for m, n, d, w in SHAPES])
def test_each_strategy_against_float64_and_bitwise_repeats(rows, n, dtype, wdtype):
    x, dy, mean, rstd = _inputs(rows, n, dtype, strided=rows == 33)
    g64, b64, gmag, bmag = _float64_sums(x, dy, mean, rstd)
    # fp32 sums of `rows` terms: well within 1e-5 of the sum of |terms| for any order;
    # plus half an ulp of the output dtype
    half_ulp = 0.0 if wdtype == torch.float32 else torch.finfo(wdtype).eps / 2
    results = {}
    for name, s, deterministic, _ in dg.STRATEGIES:
        runs = [_strategy(s, x, dy, mean, rstd, wdtype) for _ in range(3)]
        torch.cuda.synchronize()
        for got, ref, mag, what in ((runs[0][0], g64, gmag, "dgamma"),
                                    (runs[0][1], b64, bmag, "dbeta")):
            err = (got.double() - ref).abs()
            bound = 1e-5 * mag + half_ulp * ref.abs() + 1e-30
            worst = int((err / bound).argmax())
            assert bool((err <= bound).all()), (
                f"{name} {what}[{worst}] = {got[worst].item()}, float64 {ref[worst].item()}")
        if deterministic:
            for again in runs[1:]:
                for a, b in zip(runs[0], again):
                    assert torch.equal(_bits(a), _bits(b)), f"{name} not bitwise"
        results[name] = runs[0]
    # (c1) and (c2) add in the same order: only the shared layout differs
    for a, b in zip(results["cuda_dg_tile32"], results["cuda_dg_tile32_pad"]):
        assert torch.equal(_bits(a), _bits(b))


_REFUSALS = """
import torch
from bwd_suite.kernels.layer_norm import dgamma_strategies as dg
x = torch.randn(4, 8, device="cuda"); dy = torch.randn_like(x)
mean = torch.zeros(4, device="cuda"); rstd = torch.ones(4, device="cuda")
out = torch.empty(8, device="cuda")
for args in [(4, x, dy, mean, rstd, out, out.clone()),
             (0, x, dy, mean, rstd, out[:7], out.clone()),
             (0, x, dy, mean, rstd, out, out.half())]:
    try:
        dg._ext().dgamma(*args)
        print("accepted")
    except RuntimeError as e:
        print("refused:", str(e).splitlines()[0])
"""


@needs_cuda
@pytest.mark.xfail(reason="on the H200 image (torch 2.11.0+cu130, g++ 13.3) an exception "
                   "thrown inside our CUDA extensions ended the process with SIGSEGV, "
                   "c10::Error and std::runtime_error alike; cause not found, "
                   "README 'Known problems'", strict=False)
def test_bad_strategy_and_shapes_are_refused():
    # in a child process: an exception that fails to cross the binding kills the process
    # (TORCH_CHECK's c10::Error did, on the H200 image), which must fail this test, not the
    # session
    r = subprocess.run([sys.executable, "-c", _REFUSALS], cwd=ROOT, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 3 and all(line.startswith("refused:") for line in lines), lines
    for line, needle in zip(lines, ["strategy must be", "dgamma must have shape",
                                    "dbeta must have dtype"]):
        assert needle in line, line


@needs_cuda
@pytest.mark.parametrize("params", [dict(rows=4097, hidden=1024, dtype="bfloat16"),
                                    dict(rows=33, hidden=4099, dtype="float32"),
                                    dict(rows=1, hidden=31, dtype="float16",
                                         weight_dtype="match")],
                         ids=["M4097-N1024-bf16", "M33-N4099-fp32", "M1-N31-fp16-wmatch"])
def test_registered_implementations_pass_the_suite(params):
    """dx from the main kernel in dx-only mode, dgamma/dbeta from the strategy: verdict
    pass, and bitwise over 3 calls for the deterministic ones (the runner fails them
    otherwise)."""
    ctx = _case(torch.device("cuda"), **params)
    for n in NAMES:
        row = _run(ctx, n)
        assert row.verdict == "pass", f"{n}: {row['reason']}"
        if IMPLS[n].deterministic:
            assert row.determinism == "bitwise", n
