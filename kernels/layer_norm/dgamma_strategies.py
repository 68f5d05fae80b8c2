"""Seed 002's three ways of computing LayerNorm's dgamma/dbeta (section 2.4), as separate
CUDA implementations so that a run shows their costs side by side
(csrc/dgamma_strategies.cu; built on first use by kernels/cuda_build.py).

Each computes dx with this project's main kernel (kernels/layer_norm/cuda.py) in dx-only
mode (gamma given, dgamma and dbeta None: the column sums skipped), then dgamma and dbeta
with its strategy; the timed call is both, so the differences between the four rows are
the strategies' costs. Affine cases only (without affine there are no column sums).
"""

from __future__ import annotations

from pathlib import Path

from bwd_suite.kernels.cuda_build import cuda_only, load_extension
from bwd_suite.kernels.layer_norm import cuda as main_kernel
from bwd_suite.suite.registry import implementation

CSRC = Path(__file__).resolve().parent / "csrc"
SOURCES = [CSRC / "dgamma_strategies_binding.cpp", CSRC / "dgamma_strategies.cu"]

# name, DgammaStrategy value (csrc/dgamma_strategies.h), bitwise reproducible, what it is
STRATEGIES = (
    ("cuda_dg_column", 0, True, "dgamma/dbeta: one thread per column over all rows"),
    ("cuda_dg_atomic", 1, False,
     "dgamma/dbeta: 32x32 tiles over row slices, fp32 atomicAdd of every partial"),
    ("cuda_dg_tile32", 2, True,
     "dgamma/dbeta: HW4 32x32 tile, buf[32][32] read transposed (32-way bank conflicts)"),
    ("cuda_dg_tile32_pad", 3, True,
     "dgamma/dbeta: HW4 32x32 tile, padded buf[32][33] read transposed (conflict-free)"),
)


# one thread summing a column's rows in order: fp32 rounding grows with the row count
# (dgamma 26x, dbeta 290x the bound over 1048575 fp16 rows on the H200)
KNOWN_FAILURES = {"cuda_dg_column": {
    "layer_norm/liger-dgamma-million-rows/": "a sequential fp32 sum over a million rows"}}


def _ext():
    return load_extension("bwd_suite_layer_norm_dgamma", SOURCES)


def build():
    """Both extensions these implementations call."""
    return main_kernel.extension(), _ext()


def _supports(p):
    return None if p["affine"] else "dgamma strategies need affine"


def _register(name: str, strategy: int, deterministic: bool, doc: str):
    def fn(*, x, dy, gamma, mean, rstd, out):
        main_kernel.extension().bwd(x, dy, gamma, mean, rstd, out["dx"], None, None)
        _ext().dgamma(strategy, x, dy, mean, rstd, out["dgamma"], out["dbeta"])

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return implementation(
        "layer_norm", name, kind="ours", supports=_supports,
        known_failures=KNOWN_FAILURES.get(name, {}),
        deterministic=deterministic, build=build, **cuda_only())(fn)


# module attributes too, for `--impl kernels.layer_norm.dgamma_strategies:NAME`
for _row in STRATEGIES:
    globals()[_row[0]] = _register(*_row)
del _row
