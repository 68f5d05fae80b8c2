"""A minimal case as a ready-to-commit case-file block: `op = ...` and one [[case]]
with the parameters that differ from the defaults, tagged ci, with the case's seed (so
that the committed case replays the same inputs under its new id), after comment lines
that say how it failed and what the diagnosis made of it."""

from __future__ import annotations

import json
import math
import re
import tomllib
from typing import Iterable, Mapping


def value(v) -> str:
    """A TOML literal of a parameter value."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ValueError(f"no TOML literal for {v!r} in a case file")
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # a TOML basic string: JSON's escapes are TOML's
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(value(x) for x in v) + "]"
    raise TypeError(f"no TOML literal for {v!r}")


def case_name(text: str) -> str:
    """A case name (no '/', nothing a shell or an id would trip on) from `text`."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "fuzz"


def _comment(text: str, width: int = 400) -> str:
    text = " ".join(str(text).split())
    return "# " + (text if len(text) <= width else text[:width - 3] + "...")


def case_block(spec, params: Mapping, name: str, seed: int,
               comments: Iterable[str] = ()) -> str:
    """The block; it parses as TOML (checked) and loads with suite.cases.load_file."""
    lines = [_comment(c) for c in comments]
    lines += [f"op = {value(spec.name)}", "", "[[case]]", f"name = {value(name)}",
              'tags = ["ci"]']
    for p in spec.params.params:
        if params[p.name] != p.default:
            lines.append(f"{p.name} = {value(params[p.name])}")
    lines.append(f"seed = {seed}  # the fuzzed case's inputs (its seed came from its id)")
    text = "\n".join(lines) + "\n"
    tomllib.loads(text)
    return text
