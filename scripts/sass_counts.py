"""Instructions an element of one kernel launch, from Nsight Compute's per-instruction
counters: by opcode, and by how often each instruction ran (one count per tile and one per
row, say, tell the loop body from its setup).

    ncu --section SourceCounters --import-source yes -k regex:KERNEL --launch-count 1 \\
        -o rep python3 scripts/ncu_case.py --op OP --impl cuda --case CASE
    ncu --import rep.ncu-rep --page source --csv --print-source sass > sass.csv
    python3 scripts/sass_counts.py sass.csv --elements 67108864

--elements is what "an element" counts (B*D*L for the conv1d, rows*hidden for LayerNorm).
The CSV may be gzipped. Instructions are counted per thread (warp instructions x 32).
"""

from __future__ import annotations

import argparse
import collections
import csv
import gzip
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bwd_suite.suite.errors import SuiteInputError, run_script  # noqa: E402

_PREDICATE = re.compile(r"^@!?U?P\w+\s+")


def read_sass(path: Path) -> list[tuple[str, int]]:
    """(opcode with modifiers, warp instructions executed) for every SASS line."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", newline="") as f:
        rows = list(csv.reader(f))
    head = next((i for i, r in enumerate(rows) if r and r[0] == "Address"), None)
    if head is None:
        raise SuiteInputError(str(path), "no 'Address' header row: not an ncu --page source "
                                         "--csv --print-source sass export")
    cols = rows[head]
    if "Source" not in cols or "Instructions Executed" not in cols:
        raise SuiteInputError(str(path), "no 'Source' or 'Instructions Executed' column "
                                         "(profile with --section SourceCounters)")
    src, n = cols.index("Source"), cols.index("Instructions Executed")
    out = []
    for r in rows[head + 1:]:
        if len(r) < len(cols):
            continue
        text = _PREDICATE.sub("", r[src].strip())
        out.append((text.split()[0] if text else "?", int(r[n] or 0)))
    return out


def summarize(sass: list[tuple[str, int]], elements: int, top: int = 20) -> str:
    per = 32 / elements  # warp instructions -> thread instructions an element
    total = sum(n for _, n in sass)
    by_op = collections.Counter()
    by_count = collections.Counter()
    lines_at = collections.Counter()
    for op, n in sass:
        by_op[op.split(".")[0]] += n
        if n:
            by_count[n] += n
            lines_at[n] += 1
    out = [f"{total * per:.2f} instructions an element ({total} warp instructions, "
           f"{elements} elements)", "", "by opcode:"]
    out += [f"  {op:<12} {n * per:7.2f}" for op, n in by_op.most_common(top)]
    out += ["", "by times executed (warp instructions each line ran; lines; an element):"]
    out += [f"  {k:>12} {lines_at[k]:6d} {n * per:7.2f}"
            for k, n in sorted(by_count.items(), key=lambda kv: -kv[1])[:top]]
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", type=Path, help="ncu --page source --csv --print-source sass output")
    ap.add_argument("--elements", type=int, required=True, help="elements of the problem")
    ap.add_argument("--top", type=int, default=20, help="rows a table (default 20)")
    a = ap.parse_args(argv)
    if a.elements <= 0:
        raise SuiteInputError("--elements", "must be positive")
    if not a.csv.is_file():
        raise SuiteInputError(str(a.csv), "not a file")
    print(summarize(read_sass(a.csv), a.elements, a.top))
    return 0


if __name__ == "__main__":
    run_script(main, "sass_counts")
