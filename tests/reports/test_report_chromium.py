"""The report opened in a real browser: headless Chromium loads the file offline and its
rendered DOM holds the conformance matrix, the roofline table and the chart.

`.ci/run` installs the Debian package `chromium` when it is missing; elsewhere the test
skips with the reason.
"""

import re
import shutil
import subprocess

import pytest

from reports import render
from tests.reports.test_report import perf, with_failures  # noqa: F401  (fixture)

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
BROWSER = next((shutil.which(b) for b in BROWSERS if shutil.which(b)), None)


@pytest.mark.skipif(BROWSER is None, reason=f"no headless browser found (looked for "
                                            f"{', '.join(BROWSERS)}; Debian: apt-get install "
                                            f"chromium)")
def test_rendered_dom_holds_matrix_and_roofline(perf, tmp_path):  # noqa: F811
    df = with_failures(perf)
    page = render.write(render.build(df), tmp_path / "report.html")
    cmd = [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
           "--no-first-run", "--disable-background-networking", "--disable-component-update",
           "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom",
           page.as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    dom = proc.stdout
    assert proc.returncode == 0 and "</html>" in dom, proc.stderr[-2000:]
    # the browser parsed the tables (it rewrote them: tbody, attribute order) ...
    matrix = re.findall(r'<table class="matrix"[^>]*>', dom)
    assert len(matrix) == df.case_group.nunique()
    roofline_rows = re.findall(r'<tr id="ri\d+"', dom)
    assert len(roofline_rows) == len(df)
    assert '<table class="roofline"' in dom and '<svg class="chart"' in dom
    assert dom.count("<circle") >= len(df)
    # ... and every failing item's cell and entry
    n_fail = int((df.verdict == "fail").sum())
    assert len(re.findall(r'data-verdict="fail"', dom)) == n_fail
    assert len(re.findall(r'<tbody class="failure"', dom)) == n_fail
    assert "<script" not in dom
