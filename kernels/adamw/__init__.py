"""Implementations of AdamW steps (op `adamw`, ops/adamw.py)."""
