"""Ports of each op written from its documentation alone, each with one planted bug
(issue 41 item 3); manifest.toml says what each is meant to get wrong and where."""
