"""scripts/sass_counts.py, instructions an element from ncu's per-instruction counters:
checked on two stored H200 exports (the numbers BENCHMARKS.md quotes) and on bad input."""

import gzip
import importlib.util
from pathlib import Path

import pytest

from bwd_suite.suite.errors import SuiteInputError

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "tests" / "data"
CONV1D_ELEMS = 8 * 4096 * 2048  # B8-D4096-L2048-K4-bf16-cf-silu


@pytest.fixture()
def sass_counts():
    spec = importlib.util.spec_from_file_location("sass_counts", ROOT / "scripts" / "sass_counts.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("export, per_element", [
    ("ncu_sass_conv1d_cf_bf16_ltr_ring.csv.gz", "53.61"),  # left-to-right ring
    ("ncu_sass_conv1d_cf_bf16_rtl_ring.csv.gz", "41.78"),   # right-to-left ring
])
def test_stored_exports_give_the_quoted_counts(sass_counts, capsys, export, per_element):
    assert sass_counts.main([str(RUNS / export), "--elements", str(CONV1D_ELEMS)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{per_element} instructions an element"), out[:200]
    assert "FFMA" in out and "by times executed" in out


def test_counts_split_by_opcode_and_by_times_executed(sass_counts, tmp_path):
    csv = tmp_path / "k.csv.gz"
    with gzip.open(csv, "wt") as f:
        f.write('"Kernel Name","k"\n"Address","Source","Instructions Executed"\n'
                '"0x0","FFMA R1, R2, R3, R4","10"\n"0x10","@!P0 FFMA.FTZ R1, R2, R3, R4","10"\n'
                '"0x20","EXIT","1"\n"0x30","BRA 0x0","0"\n')
    sass = sass_counts.read_sass(csv)
    assert sass == [("FFMA", 10), ("FFMA.FTZ", 10), ("EXIT", 1), ("BRA", 0)]
    text = sass_counts.summarize(sass, elements=32)  # 32 threads a warp: 1 per instruction
    assert text.startswith("21.00 instructions an element")
    assert "FFMA           20.00" in text
    assert "10      2   20.00" in text and "1      1    1.00" in text


def test_refuses_what_is_not_a_sass_export(sass_counts, tmp_path):
    bad = tmp_path / "x.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(SuiteInputError, match="Address"):
        sass_counts.main([str(bad), "--elements", "4"])
    with pytest.raises(SuiteInputError, match="positive"):
        sass_counts.main([str(bad), "--elements", "0"])


def test_bad_input_is_one_line_and_status_2(tmp_path):
    import subprocess
    import sys
    bad = tmp_path / "x.csv"
    bad.write_text("a,b\n")
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "sass_counts.py"), str(bad),
                        "--elements", "4"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert r.stderr.strip() == f"sass_counts: {bad}: no 'Address' header row: not an ncu " \
                               "--page source --csv --print-source sass export"
