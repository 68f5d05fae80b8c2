"""Implementations of cross entropy forward and backward (op `cross_entropy`, ops/cross_entropy.py)."""
