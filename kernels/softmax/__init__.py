"""Implementations of the softmax backward (op `softmax`, ops/softmax.py)."""
