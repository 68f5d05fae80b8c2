"""One colour per implementation, the same in every chart and table of a page and, as far
as the palette allows, of every page.

The rule (docs/reports.md#colours):

1. The suite's own implementations (FIXED) have a slot each, chosen once so that the
   implementations of one op are far apart in colour; they keep it on every page.
2. Any other name's preferred slot is the CRC-32 of its UTF-8 bytes modulo the palette's
   size: stable across processes, machines and Python versions (`hash()` is salted).
3. On a page, the FIXED names present take their slots; the other names present, in
   code-point order of their names, take their preferred slot or, when a name before them
   holds it, the next free one. So a name moves only when it collides with another name
   on the same page, and names seen on one page only (a baseline's, say) move nothing that
   does not collide with them.
4. A page of more implementations than slots (a run with every mutant) reuses slots
   after that: those names share colours, the earlier names keep theirs.

PALETTE was picked greedily for the largest smallest CIEDE2000 distance between any two
entries (at least 11; most pairs far more) among sRGB colours with at least 3:1 contrast
against white (WCAG's minimum for graphics), a chroma of at least 30 (no greys) and at
least 16 from the page's verdict colours (fail red, error purple, timeout brown, grey
unsupported, known-failure amber), so that a passing dot never reads as a verdict.
tests/reports/test_charts.py holds it to that.
"""

from __future__ import annotations

import zlib
from typing import Iterable

PALETTE = (
    "#1f77b4", "#005522", "#11aa00", "#ff4499", "#009988", "#554400", "#dd7766", "#880044",
    "#cc44ff", "#667700", "#334477", "#8877aa", "#5555ff", "#aa5566", "#663311", "#cc0099",
    "#0099bb", "#7788ff", "#558855", "#ff2200", "#ff1155", "#007700", "#889944", "#bb7799",
    "#3399ee", "#006655", "#bb8866", "#445500", "#5566aa", "#776633", "#bb77cc", "#00aa66",
)
# The suite's implementations (kernels/; mutants hash): slots maximising the smallest
# colour distance between the implementations of each op (attention's 13 at least 18).
FIXED = {
    "torch_ref": 0, "cuda": 2, "torch_tiled": 3,
    "cuda_dg_atomic": 15, "cuda_dg_column": 30, "cuda_dg_tile32": 9, "cuda_dg_tile32_pad": 20,
    "dao": 27, "dao_det": 19, "flash_attn2": 31, "flash_attn3": 29, "liger": 5,
    "torch_cudnn": 10, "torch_cudnn_mask": 22, "torch_efficient": 25,
    "torch_efficient_mask": 8, "torch_flash": 6, "torch_flex": 21, "torch_foreach": 23,
    "torch_fp32": 7, "torch_fused": 1, "torch_fused_fp32": 13, "torch_math": 14,
    "torch_sdpa": 11, "x_form": 4, "xhat_form": 26,
}
OTHER = "#7f7f7f"  # a name the page's colours do not hold


def slot(name: str) -> int:
    """The preferred palette slot of an implementation name."""
    if name in FIXED:
        return FIXED[name]
    return zlib.crc32(name.encode("utf-8")) % len(PALETTE)


def colors(names: Iterable[str]) -> dict:
    """{implementation: colour} for the names of one page (the rule above)."""
    names = sorted(set(n for n in names if isinstance(n, str)))
    taken: dict = {}  # slot -> name
    out = {}
    for name in sorted(names, key=lambda n: (n not in FIXED, n)):
        k = slot(name)
        if len(taken) < len(PALETTE):
            while k in taken:
                k = (k + 1) % len(PALETTE)
            taken[k] = name
        out[name] = PALETTE[k]  # past the palette's size: the preferred slot, shared
    return out


def color(colors_: dict, name: str) -> str:
    return colors_.get(name, OTHER)
