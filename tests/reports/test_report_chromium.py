"""The report opened in a real browser: headless Chromium loads the file offline and its
rendered DOM holds the conformance matrix, the roofline table and the chart.

`.ci/run` installs the Debian package `chromium` when it is missing; elsewhere the test
skips with the reason.
"""

import re
import shutil
import subprocess

import pytest

from bwd_suite.reports import render
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


# the page's width, measured by the browser: a script added to a copy of the page (the
# report itself has none) writes what it finds into the DOM that --dump-dom prints
PROBE = """<script>
var v = window.innerWidth, out = [];
document.querySelectorAll('body *').forEach(function (e) {
  var r = e.getBoundingClientRect(), p = e.parentElement, inside = false;
  if (r.right <= v + 0.5) return;
  while (p) { if (p.classList && p.classList.contains('scroll')) { inside = true; break; }
              p = p.parentElement; }
  if (!inside) out.push(e.tagName + '.' + e.className + ' ' + Math.round(r.right));
});
var d = document.createElement('pre'); d.id = 'probe';
d.textContent = JSON.stringify({scroll: document.documentElement.scrollWidth, inner: v,
                                 out: out.slice(0, 20)});
document.body.appendChild(d);
</script>"""


@pytest.mark.skipif(BROWSER is None, reason="no headless browser found")
def test_no_horizontal_overflow_at_1280_px(perf, tmp_path):  # noqa: F811
    """Many implementations, long case ids and reasons, a baseline and a history: every
    wide table scrolls inside its own box and the page is no wider than the window."""
    import json

    import pandas as pd

    wide = pd.concat([perf.assign(impl=perf.impl + f"_with_a_long_name_{k}",
                                  case_id=perf.case_id + "-" + "x" * 60)
                      for k in range(8)], ignore_index=True)
    wide = with_failures(wide, every=4)
    wide.loc[0, "reason"] = "y" * 500
    report = render.build(wide, wide, render.Options(history=(
        ("night", wide.assign(run_id="n", run_started="2026-01-01T00:00:00+00:00")),)))
    html = render.render(report).replace("</body>", PROBE + "</body>")
    page = tmp_path / "probe.html"
    page.write_text(html, encoding="utf-8")
    cmd = [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--hide-scrollbars", "--window-size=1280,900",
           f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", page.as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    found = re.search(r'<pre id="probe">(.*?)</pre>', proc.stdout)
    assert found, proc.stderr[-2000:]
    got = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert got["inner"] == 1280
    assert got["scroll"] <= got["inner"] and not got["out"], got
