"""Linear backward ports from docs/ops/linear.md and golden/linear.py, one bug each."""
