"""Cross entropy ports from docs/ops/cross_entropy.md and golden/cross_entropy.py, one bug each."""
