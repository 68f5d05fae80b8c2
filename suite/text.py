"""Text from results and case files, made safe for where it is printed.

Case ids, implementation names and reasons come from files anyone can edit (a case file, a
results file downloaded from a nightly job) and from whatever an implementation raised: a
newline or an ESC sequence in them must not reach a terminal raw, and HTML or backticks
must not reach a markdown page as markup. Each function turns any value into one line of
its medium.
"""

from __future__ import annotations

import re

# C0 and C1 control characters and DEL; the bidi overrides that reorder what a terminal
# shows (U+202A-U+202E, U+2066-U+2069)
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(m: re.Match) -> str:
    c = m.group()
    return _NAMED.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")


def terminal(value) -> str:
    """One line for a terminal: control characters as visible escapes (\\n, \\x1b)."""
    return _CONTROL.sub(_escape, "" if value is None else str(value))


def markdown_cell(value) -> str:
    """One markdown table cell of plain text: HTML characters as entities, pipes and
    backslashes escaped, control characters as visible escapes."""
    text = terminal(value).replace("\\", "\\\\")
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("|", "\\|").replace("`", "\\`").replace("*", "\\*") \
        .replace("_", "\\_").replace("[", "\\[").replace("]", "\\]")


def code_span(value) -> str:
    """A markdown code span holding `value` verbatim: a fence of more backticks than the
    longest run inside it (CommonMark), pipes escaped for a table cell."""
    text = terminal(value)
    runs = [len(r) for r in re.findall("`+", text)]
    fence = "`" * (max(runs, default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{fence}{pad}{text.replace('|', chr(92) + '|')}{pad}{fence}"


ELLIPSIS = "…"


def shorten(text: str, limit: int) -> str:
    """`text` in at most `limit` characters: cut at the last space that fits, marked with
    "…" (a word longer than half the limit is cut inside); unchanged when it fits."""
    if len(text) <= limit:
        return text
    head = text[:max(limit - 1, 0)]
    space = head.rfind(" ")
    if space >= limit // 2:
        head = head[:space]
    return head.rstrip(" ,;:") + ELLIPSIS
