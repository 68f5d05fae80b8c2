"""Implementations of the LayerNorm backward (op `layer_norm`)."""
