"""Numbers as text, in the units and digits of the report's page: reports/fmt.py shows
these beside each number's full-precision value, and the terminal (the run's summary)
prints the same text, so a number reads alike in both (`6.28 %`, `1.23 ms`, `8.4 MB`)."""

from __future__ import annotations

TIME = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"))
BYTES = ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB"), (1.0, "B"))
FLOPS = ((1e15, "PFLOP"), (1e12, "TFLOP"), (1e9, "GFLOP"), (1e6, "MFLOP"), (1e3, "kFLOP"),
         (1.0, "FLOP"))


def scaled(f: float, units) -> str:
    """`f` in the largest unit it reaches (the smallest below them all), 3 digits."""
    for scale, unit in units:
        if abs(f) >= scale:
            return f"{f / scale:.3g} {unit}"
    scale, unit = units[-1]
    return f"{f / scale:.3g} {unit}"


def seconds(f: float) -> str:
    return "0 s" if f == 0 else scaled(f, TIME)


def nbytes(f: float) -> str:
    return scaled(f, BYTES)


def rate(f: float) -> str:
    """GB/s and the like: whole numbers from 100 up, 3 significant digits below."""
    return f"{f:,.0f}" if abs(f) >= 100 else f"{f:.3g}"


def percent(f: float) -> str:
    """A fraction as a percentage."""
    return f"{100 * f:.3g} %"
