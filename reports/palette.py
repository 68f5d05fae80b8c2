"""One colour per implementation, the same in every chart and table of a page and, for
the suite's own implementations, of every page: a fixed colour for each name in FIXED,
and for any other name the palette slot its CRC-32 picks (the next free slot when another
implementation of the page holds it; slots are reused only once all are taken)."""

from __future__ import annotations

import zlib
from typing import Iterable

# Tableau 10 without its red (the page's colour of a failure) and grey (of unsupported),
# then darker tones of Tableau 20b: distinct on white
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf",
           "#bcbd22", "#393b79", "#637939", "#8c6d31", "#6b6ecf", "#ad494a", "#7b4173")
FIXED = {  # the suite's implementations (kernels/), so that they keep their colour
    "torch_ref": 0, "torch_tiled": 1, "cuda": 2, "dao": 3, "liger": 4, "dao_det": 5,
    "torch_fused_fp32": 6, "xhat_form": 7, "x_form": 8,
}
OTHER = "#7f7f7f"


def slot(name: str) -> int:
    """The preferred palette slot of an implementation name."""
    if name in FIXED:
        return FIXED[name]
    return zlib.crc32(name.encode("utf-8")) % len(PALETTE)


def colors(names: Iterable[str]) -> dict:
    """{implementation: colour} for the names of one page. Names in FIXED take their slot
    first; the others, in name order, their preferred slot or the next free one."""
    names = sorted(set(n for n in names if isinstance(n, str)))
    taken: dict = {}
    out = {}
    for name in sorted(names, key=lambda n: (n not in FIXED, n)):
        want = slot(name)
        k = want
        if len(taken) < len(PALETTE):
            while k in taken and taken[k] != name:
                k = (k + 1) % len(PALETTE)
        taken.setdefault(k, name)
        out[name] = PALETTE[k]
    return out


def color(colors_: dict, name: str) -> str:
    return colors_.get(name, OTHER)
