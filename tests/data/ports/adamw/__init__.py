"""AdamW step ports from docs/ops/adamw.md and golden/adamw.py, one bug each."""
