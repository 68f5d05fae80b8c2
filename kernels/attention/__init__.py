"""Implementations of the attention backward (op `attention`, ops/attention.py)."""
