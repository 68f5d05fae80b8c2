"""The HTML report: `python -m bwd_suite report RESULTS... [--baseline RESULTS...]`.

Python computes every number (these modules, each one section of the page); jinja2
templates under reports/templates/ only lay them out, with autoescaping on. The page is
one self-contained file: inline CSS and SVG, no scripts, fonts or links outside it.
"""
