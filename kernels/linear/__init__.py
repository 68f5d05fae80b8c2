"""Implementations of the linear layer backward (ops/linear.py)."""
