"""Size profiles of the fuzzer: how large a drawn case may be.

A profile is data: the most elements the size axes of a case may multiply to (the axes
are the parameters whose domain is an `IntRange(..., axis=True)`: batch x channels x
length, rows x hidden), and its name, under which a parameter's domain may cap that
parameter (`IntRange(2, 16, caps={"small": 8})`). No op is named here: the ops say which
of their parameters are axes and which are capped.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SizeProfile:
    name: str
    max_numel: int  # the most the size axes of a drawn case multiply to
    doc: str


SIZES = {
    "small": SizeProfile("small", 4096, "a few thousand elements: every case takes "
                                        "milliseconds on a CPU, for CI"),
    "gpu": SizeProfile("gpu", 1 << 22, "up to 4M elements (tens of MB an input, a few "
                                       "hundred MB with the float64 golden): for a GPU"),
}
