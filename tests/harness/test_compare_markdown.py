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


def outside_code(md: str) -> str:
    """The markdown without its code spans (a fence of backticks to the same fence)."""
    return re.sub(r"(?<!`)(`+)(?!`).*?(?<!`)\1(?!`)", "", md)


def cells(line: str) -> int:
    """The cells of a markdown table row: pipes not escaped with a backslash."""
    return len(re.findall(r"(?<!\\)\|", line)) - 1


def test_markdown_holds_names_and_reasons_as_text(tmp_path, capsys):
    base, cur = runs(tmp_path, CASE)
    assert main(["compare", str(base), str(cur), "--format", "markdown"]) == 1
    md = capsys.readouterr().out
    assert "### New failures (1)" in md
    # as &lt;img, text; verbatim only inside a code span (the rerun command: not markup)
    assert "<img" not in outside_code(md) and "<script" not in md
    row = next(line for line in md.splitlines() if "onerror" in line)
    # op, case, impl, before, now, reason, rerun (issue 40 adds the rerun command)
    assert code_span(CASE) in row and cells(row) == 7
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


# -- a rerun command for every failure, reasons cut at a word boundary (issue 40) ------------

LONG = "dx mismatch: " + " ".join(f"term{i}" for i in range(80))


def test_every_format_carries_the_command_that_reruns_a_new_failure(tmp_path, capsys):
    import csv
    import io
    import json

    from bwd_suite.suite.reproduce import rerun_command

    rows = results.read_rows([PERF])
    base, cur = tmp_path / "base.parquet", tmp_path / "cur.parquet"
    with results.ResultsWriter(base) as w:
        for r in rows:
            w.add(r)
    rows[0].finish(Verdict.FAIL, LONG, FailureKind.MISMATCH)
    with results.ResultsWriter(cur) as w:
        for r in rows:
            w.add(r)
    want = rerun_command(rows[0])
    assert want.startswith("python -m bwd_suite run --case ") and "--impl " in want

    assert main(["compare", str(base), str(cur)]) == 1
    out = capsys.readouterr().out.splitlines()
    at = out.index("NEW FAILURES (1):")
    entry, rerun = out[at + 1], out[at + 2]
    assert rerun == f"      rerun: {want}"
    said = entry.split("]  ", 1)[1]  # the reason, cut at a word boundary
    assert said.endswith("…") and LONG.startswith(said[:-1]) and said[-2].isdigit()
    assert len(said) <= 200
    assert main(["compare", str(base), str(cur), "--full-reasons"]) == 1
    assert LONG in capsys.readouterr().out

    assert main(["compare", str(base), str(cur), "--format", "json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    (new,) = [i for i in doc["items"] if i["category"] == "new_failure"]
    assert new["rerun"] == want and new["reason"] == LONG  # json holds it whole
    assert doc["geomean"]["items"] == 38 and doc["geomean"]["ratio"] == pytest.approx(1.0)

    assert main(["compare", str(base), str(cur), "--format", "csv"]) == 1
    (new,) = [r for r in csv.DictReader(io.StringIO(capsys.readouterr().out))
              if r["category"] == "new_failure"]
    assert new["rerun"] == want

    assert main(["compare", str(base), str(cur), "--format", "markdown"]) == 1
    md = capsys.readouterr().out
    row = next(line for line in md.splitlines() if rows[0].case_id in line and "rerun" not in
               line and "run --case" in line)
    assert row.endswith(f" | {code_span(want)} |") and "…" in row and cells(row) == 7
    assert "geometric mean of the ratios (current / baseline): x1.000 over 38 timings" in md
    assert "<details><summary>Compared timings (38;" in md
