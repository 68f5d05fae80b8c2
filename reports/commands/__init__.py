"""The commands that read results into pages and gates (`report`, `compare`): here, beside
the rendering they use, so that suite/ never imports reports/ (bwd_suite/cli.py gathers the
commands of both)."""
