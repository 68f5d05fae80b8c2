"""`compare`'s output of names, case ids and reasons taken from results files: markdown for a
pull-request comment holds them as plain text or code spans, never as markup, and the
terminal gets each on one line with its control characters escaped."""

import re

import pytest

from bwd_suite.suite import results
from bwd_suite.cli import main
from bwd_suite.suite.outcomes import FailureKind, Verdict
from bwd_suite.suite.text import code_span
from tests.reports.test_report import PERF

IMG = "<img src=x onerror=alert(1)>"
CASE = "conv`s``|x"  # backticks and a pipe: neither may end the code span or the cell
REASON = "dx wrong <script>alert(1)</script> | **bold** [link](http://x)"
ESC_CASE = "conv\nresult: ok\x1b[2K"  # a newline and an ESC sequence


def runs(tmp_path, case_id: str, impl: str = IMG):
    """PERF as the baseline, and a copy with its first item renamed (in both runs) and
    failing now with REASON."""
    rows = results.read_rows([PERF])
    base, cur = tmp_path / "base.parquet", tmp_path / "cur.parquet"
    for path, fail in ((base, False), (cur, True)):
        with results.ResultsWriter(path) as w:
            for i, r in enumerate(rows):
                if i == 0:
                    r.case_id, r.impl = case_id, impl
                    if fail:
                        r.finish(Verdict.FAIL, REASON, FailureKind.MISMATCH)
                w.add(r)
    return base, cur


def cells(line: str) -> int:
    """The cells of a markdown table row: pipes not escaped with a backslash."""
    return len(re.findall(r"(?<!\\)\|", line)) - 1


def test_markdown_holds_names_and_reasons_as_text(tmp_path, capsys):
    base, cur = runs(tmp_path, CASE)
    assert main(["compare", str(base), str(cur), "--format", "markdown"]) == 1
    md = capsys.readouterr().out
    assert "### New failures (1)" in md
    assert "<img" not in md and "<script" not in md  # as &lt;img, text
    row = next(line for line in md.splitlines() if "onerror" in line)
    assert code_span(CASE) in row and cells(row) == 6  # op, case, impl, before, now, reason
    assert "&lt;img src=x onerror=alert(1)&gt;" in row
    assert "\\*\\*bold\\*\\*" in row and "\\[link\\]" in row


@pytest.mark.parametrize("fmt", ["text", "markdown"])
def test_control_characters_never_reach_the_output_raw(fmt, tmp_path, capsys):
    base, cur = runs(tmp_path, ESC_CASE, impl="impl\x1b]0;title\x07")
    assert main(["compare", str(base), str(cur), "--format", fmt]) == 1
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "conv\\nresult: ok\\x1b[2K" in out
    assert not any(line.startswith("result: ok") for line in out.splitlines())
