"""LayerNorm backward ports from docs/ops/layer_norm.md and golden/layer_norm.py, one bug each."""
