"""What an implementation says about the item it ran: the kernel, epilogue or algorithm a
library picked for this case (cuBLASLt's heuristics, say), which the verdict alone does
not show. Stored as a JSON object in the row's `impl_facts_json`.

An implementation calls `report(name=value, ...)` from its call or its `prepare`; the
runner collects what the untimed preparation and the first checked call reported
(`collecting`). Values are strings, numbers or booleans; a name reported twice keeps the
last value. Outside a collection (the timed calls, a script) `report` does nothing, so it
costs an implementation nothing where nobody asks.
"""

from __future__ import annotations

import contextlib
import json
from typing import Iterator, Optional

_collected: Optional[dict] = None


def report(**facts) -> None:
    """Record facts about the item being run (no-op outside a collection)."""
    if _collected is None:
        return
    for name, value in facts.items():
        if value is not None and not isinstance(value, (str, int, float, bool)):
            value = str(value)
        _collected[str(name)] = value


@contextlib.contextmanager
def collecting() -> Iterator[dict]:
    """Collect what `report` receives inside the block into the dict it yields (nested:
    the inner block's facts go to both)."""
    global _collected
    outer, mine = _collected, {}
    _collected = mine
    try:
        yield mine
    finally:
        if outer is not None:
            outer.update(mine)
        _collected = outer


def as_json(facts: dict) -> Optional[str]:
    """The facts as a JSON object, None when there are none."""
    return json.dumps(facts, sort_keys=True) if facts else None
