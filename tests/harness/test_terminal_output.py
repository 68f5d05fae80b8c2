"""What a run and the text commands print on a terminal: names and reasons from case and
results files escaped, the summary's determinism counts honest, declared failures streamed
as expected, and the implementations that cannot run here left out of the progress count.

Fake rows only (suite.rows.ResultRow(...).finish(...)); nothing here times anything."""

import io
import json
from types import SimpleNamespace

from bwd_suite.suite import coverage, progress, summary
from bwd_suite.cli import main
from bwd_suite.suite.commands import coverage as coverage_cmd
from bwd_suite.suite.commands import mutants
from bwd_suite.suite.outcomes import Determinism, FailureKind, Verdict
from bwd_suite.suite.rows import ResultRow
from tests.harness.test_summary import table

ESC = "\x1b"
EVIL_CASE = "softmax/g/rows4\n\x1b[2J\x1b[31mred"
EVIL_IMPL = "cu\x1b]0;title\x07da"
EVIL_REASON = "mismatch\n  FAIL forged line\x1b[0m"


def _row(impl="cuda", case="softmax/g/rows4", verdict="pass", reason="", op="softmax",
         **columns) -> ResultRow:
    return ResultRow(op=op, impl=impl, case_id=case, **columns).finish(Verdict(verdict),
                                                                         reason)


def _progress(rows, **kw) -> list:
    """The lines a non-terminal stream gets from Progress over `rows`."""
    out = io.StringIO()
    p = progress.Progress(kw.pop("total", len(rows)), stream=out, **kw)
    for r in rows:
        p.add(r)
    p.close()
    return out.getvalue().splitlines()


def _no_raw_control(text: str) -> None:
    """Only our own layout newlines: no ESC, BEL or carriage return from the data."""
    assert ESC not in text and "\x07" not in text and "\r" not in text, repr(text)


# -- 1. escaping -----------------------------------------------------------------------------

def test_progress_escapes_case_impl_and_reason():
    lines = _progress([_row(EVIL_IMPL, EVIL_CASE, "fail", EVIL_REASON)])
    _no_raw_control("\n".join(lines))
    fail = [ln for ln in lines if "FAIL" in ln]
    assert len(fail) == 1, lines  # the reason's newline did not forge a second FAIL line
    assert fail[0].startswith("  FAIL cu\\x1b]0;title\\x07da softmax/g/rows4\\n\\x1b[2J")
    assert fail[0].endswith("mismatch\\n  FAIL forged line\\x1b[0m")
    assert "cu\\x1b]0;title\\x07da" in lines[-1]  # the counter line too


def test_summary_escapes_names_reasons_diagnoses_and_declarations():
    # op "toy": no diagnosis hook in the registry to run over these fake rows
    rows = [_row(EVIL_IMPL, EVIL_CASE, "fail", EVIL_REASON, op="toy",
                 diagnosis="likely\x1b[1m x"),
            _row("dao", EVIL_CASE, "fail", "r", op="toy",
                 known_failure="declared\n\x1b[5mblink"),
            _row("dao", EVIL_CASE + "2", "pass", op="toy", known_failure="old\x1bdecl"),
            _row("ours", EVIL_CASE, "pass", op="toy", yardstick_note="note\x1b[7m")]
    text = summary.render(rows)
    _no_raw_control(text)
    lines = text.splitlines()
    assert "  FAIL  cu\\x1b]0;title\\x07da softmax/g/rows4\\n\\x1b[2J\\x1b[31mred" in lines
    assert "        mismatch\\n  FAIL forged line\\x1b[0m" in lines
    assert "        diagnosis: likely\\x1b[1m x" in lines
    assert "toy" in lines  # the op heads its implementations' rows in the table
    assert any(ln.startswith("  cu\\x1b]0;title\\x07da ") for ln in lines)
    assert "  toy/dao: 1 items: declared\\n\\x1b[5mblink" in lines
    assert f"  dao {EVIL_CASE}2".replace("\n", "\\n").replace(ESC, "\\x1b") in lines
    assert any("note\\x1b[7m" in ln for ln in lines)


def test_mutants_table_escapes_names_and_diagnoses():
    diag = SimpleNamespace(title="halo\x1b[31m", text="likely\nhalo\x1b[0m", cause="halo")
    result = mutants.MutantResult("softmax", "mut\x1b[2Jant", "halo\n", 3, 2, diag)
    report = mutants.ZooReport("ci\x1b", "cpu", 3, (result,), 1.0, (("softmax", 3),))
    text = mutants.render(report)
    _no_raw_control(text)
    assert "mut\\x1b[2Jant  2 of 3     halo\\x1b[31m  halo\\n" in text
    assert "    likely\\nhalo\\x1b[0m" in text.splitlines()
    md = mutants.render(report, markdown=True)
    assert ESC not in md and "| `mut\\x1b[2Jant` |" in md


def test_coverage_text_escapes_everything_from_the_results():
    rows = []
    for rows_ in (1, 2):
        for impl, why in (("full", None), (EVIL_IMPL, "no\x1b[31m rows 2")):
            params = {"rows": rows_, "kind\n\x1b": "x"}
            unsupported = why and rows_ == 2
            rows.append(_row(impl, f"t\x1b/g/{rows_}", "unsupported" if unsupported else "pass",
                             why if unsupported else "", op="t\x1bop",
                             params_json=json.dumps(params)))
    lines = coverage_cmd.render_text(coverage.compute(rows, registry={}), 20)
    text = "\n".join(lines)
    _no_raw_control(text)
    assert "\nt\\x1bop / cu\\x1b]0;title\\x07da: 2 items: 1 ran (1 pass), 1 unsupported" \
        in lines
    assert "  unsupported: 1 no\\x1b[31m rows 2" in lines
    assert all("\n" not in ln.lstrip("\n") for ln in lines)  # one terminal line each


def test_list_escapes_case_ids(capsys, tmp_path):
    f = tmp_path / "evil.toml"
    f.write_text('op = "softmax"\n[[case]]\nname = "p\\u001b[31mred\\nX"\ntags = ["ci"]\n')
    assert main(["list", "--cases", str(f), "--device", "cpu", "--profile", "ci",
                 "--ids"]) == 0
    out = capsys.readouterr().out
    _no_raw_control(out)
    ids = out.split("case ids in profile ci:\n", 1)[1].splitlines()
    assert len(ids) == 1 and ids[0].startswith("  softmax/p\\x1b[31mred\\nX/"), ids


# -- 2. the summary's determinism counts -----------------------------------------------------

def _counts(text: str, impl: str) -> dict:
    cells = table(text)[impl]
    return {"bitwise": int(cells["bitwise"]), "nondet": int(cells["nondet"])}


def test_summary_counts_nondeterministic_beside_bitwise():
    written = [{"name": "dx", "n_unwritten": 0}]
    rows = [_row(determinism=Determinism.BITWISE, outputs=written),
            _row(determinism=Determinism.BITWISE),
            _row(determinism=Determinism.NONDETERMINISTIC),
            _row(determinism=Determinism.NONDETERMINISTIC),
            _row(determinism=Determinism.NONDETERMINISTIC),
            _row(determinism=Determinism.NOT_CHECKED)]
    text = summary.render(rows)
    head = next(ln for ln in text.splitlines() if ln.startswith("  implementation")).split()
    assert head[head.index("bitwise") + 1] == "nondet"
    assert _counts(text, "cuda") == {"bitwise": 2, "nondet": 3}
    legend = " ".join(text.split())  # wrapped at 100 columns
    assert "'bitwise' / 'nondet': items whose repeated calls were bit-for-bit equal" in legend
    assert "differed within tolerance (--repeats)" in legend


def test_summary_never_counts_unwritten_outputs_as_bitwise():
    part = [{"name": "dx", "n_unwritten": 0}, {"name": "dw", "n_unwritten": 17}]
    # op "toy": no diagnosis hook in the registry to run over the failing row
    rows = [_row(op="toy", determinism=Determinism.BITWISE),
            _row(op="toy", determinism=Determinism.BITWISE, outputs=part),
            _row(op="toy", determinism=Determinism.BITWISE,
                 outputs=[{"name": "dx", "n_unwritten": None}]),
            ResultRow(op="toy", impl="cuda", case_id="c", determinism=Determinism.BITWISE)
            .finish(Verdict.FAIL, "dx unwritten", FailureKind.UNWRITTEN)]
    text = summary.render(rows)
    assert _counts(text, "cuda") == {"bitwise": 2, "nondet": 0}
    assert "(never one that left an output unwritten)" in " ".join(text.split())


# -- 3. declared failures as they stream -----------------------------------------------------

def test_progress_prints_a_declared_failure_as_expected():
    rows = [_row("dao", "softmax/g/a", "fail", "dx mismatch",
                 known_failure="atomics in dweight: order varies\nsecond line"),
            _row("dao", "softmax/g/b", "error", "raised", known_failure="no fp16 path")]
    lines = _progress(rows, quiet=True)
    assert lines == [
        "  expected FAIL dao softmax/g/a: declared: atomics in dweight: order varies"
        "\\nsecond line",
        "  expected ERROR dao softmax/g/b: declared: no fp16 path"]


def test_progress_prints_an_unexpected_pass():
    rows = [_row("dao", "softmax/g/a", "pass", known_failure="atomics in dweight"),
            _row("dao", "softmax/g/b", "pass"),
            _row("dao", "softmax/g/c", "fail", "dx mismatch")]
    assert _progress(rows, quiet=True) == [
        "  UNEXPECTED PASS dao softmax/g/a: declared to fail: atomics in dweight",
        "  FAIL dao softmax/g/c: dx mismatch"]


# -- 4. what cannot run here -----------------------------------------------------------------

GPU_ONLY = "runs on cuda only, not cpu"


def test_progress_counts_only_the_items_that_can_run_here():
    not_here = {"softmax/cuda": progress.NotHere(3, GPU_ONLY),
                "layer_norm/apex": progress.NotHere(2, "no apex")}
    rows = []
    for i in range(4):
        rows += [_row("torch_ref", f"softmax/g/{i}"), _row("cuda", f"softmax/g/{i}",
                                                           "unsupported", GPU_ONLY)]
    rows = rows[:-1] + [_row("apex", "layer_norm/g/0", "unsupported", "no apex",
                             op="layer_norm")] * 2
    lines = _progress(rows, total=len(rows), not_here=not_here)
    # groups of as many implementations in the order of their reasons
    assert lines[0] == ("not run here (recorded as unsupported; 5 items of 2 implementations):"
                        " layer_norm/apex (no apex); softmax/cuda (runs on cuda only, not cpu)")
    counters = [ln.split("]")[0] for ln in lines[1:]]
    assert counters == [f"[{i:>5}/4" for i in range(1, 5)], lines
    assert not any(" cuda " in ln or "apex" in ln for ln in lines[1:])


def test_not_here_rows_that_ran_are_still_shown_and_counted():
    """A left-out implementation that somehow did run is not hidden."""
    not_here = {"softmax/cuda": progress.NotHere(1, GPU_ONLY)}
    lines = _progress([_row("torch_ref"), _row("cuda", verdict="error", reason="boom")],
                      total=3, not_here=not_here)
    counters = [ln.split("]")[0] + "]" if ln.startswith("[") else ln for ln in lines[1:]]
    assert counters == ["[    1/2]", "  ERROR cuda softmax/g/rows4: boom", "[    2/2]"]


def test_not_here_line_is_escaped_grouped_and_truncated():
    many = {f"op{i:02}/cuda_kernel_{i:02}": progress.NotHere(10, GPU_ONLY) for i in range(30)}
    evil = {"evil/x\x1b[31m": progress.NotHere(1, "needs\nthe \x1b[2J extension")}
    many.update(evil)
    line = progress.not_here_line(many)
    _no_raw_control(line)
    assert line.startswith("not run here (recorded as unsupported; 301 items of 31 "
                           "implementations): op00/cuda_kernel_00, op01/cuda_kernel_01, ")
    assert len(line) <= 300
    shown = line.count("/cuda_kernel_")
    assert 2 <= shown < 30
    assert line.endswith(f"; and {31 - shown} more (`python -m bwd_suite list` says why)")
    assert progress.not_here_line(evil) == (
        "not run here (recorded as unsupported; 1 item of 1 implementation): "
        "evil/x\\x1b[31m (needs\\nthe \\x1b[2J extension)")


def test_quiet_progress_prints_no_not_here_line_but_still_the_failures():
    not_here = {"softmax/cuda": progress.NotHere(1, GPU_ONLY)}
    rows = [_row("cuda", verdict="unsupported", reason=GPU_ONLY),
            _row("torch_ref", verdict="fail", reason="dx mismatch")]
    assert _progress(rows, quiet=True, not_here=not_here) == [
        "  FAIL torch_ref softmax/g/rows4: dx mismatch"]
