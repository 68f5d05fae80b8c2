"""Causal conv1d backward ports from docs/ops/causal_conv1d.md and golden/causal_conv1d.py,
one bug each."""
