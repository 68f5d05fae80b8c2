"""Attention backward ports from docs/ops/attention.md and golden/attention.py, one bug each."""
