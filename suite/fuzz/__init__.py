"""Fuzzing an implementation: cases drawn from the parameters' domains, failures shrunk.

`python -m bwd_suite fuzz` (suite/commands/fuzz.py) draws cases from the domains each op
declares on its parameters (suite.params: IntRange, FloatRange, IntList; choices and
bools), within a size profile (sizes.py), runs them through the Driver like any run,
shrinks every distinct failure to a minimal case (shrink.py) and prints it as a case-file
block (toml.py). docs/fuzz.md describes the whole.

- domains.py: boundary-biased sampling of one parameter's domain;
- sizes.py: the size profiles (small, gpu) as data;
- draw.py: whole cases, deterministic by seed, refused and unsupported ones skipped;
- shrink.py: the greedy shrinker and the failure signature it keeps;
- toml.py: the ready-to-commit [[case]] block.
"""
