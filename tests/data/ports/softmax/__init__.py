"""Softmax backward ports from docs/ops/softmax.md and golden/softmax.py, one bug each."""
