"""The CUDA sources compile with nvcc alone (no torch, no GPU), for sm_90, and ptxas
reports no register spills: a broken or spilling kernel fails CI although CI has no GPU."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

KERNELS = Path(__file__).resolve().parents[1] / "kernels"
NVCC = shutil.which("nvcc")


@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
@pytest.mark.parametrize("source", sorted(KERNELS.glob("*/csrc/*.cu")),
                         ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_compiles_for_sm90_without_spills(source, tmp_path):
    r = subprocess.run([NVCC, "-c", "-std=c++17", "-O3", "--use_fast_math",
                        "-gencode=arch=compute_90,code=sm_90", "-Xptxas", "-v",
                        str(source), "-o", str(tmp_path / "k.o")],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    spills = [int(n) for n in re.findall(r"(\d+) bytes spill stores", r.stderr)]
    assert spills, "ptxas printed no resource report"
    assert max(spills) == 0, f"register spills: {sorted(set(spills))} bytes"
