"""Deliberately broken causal conv1d backwards: each plants one bug from seed 000's
symptom table into the tiled model (kernels/causal_conv1d/tiled.py). The suite must fail
every one of them on the default CI cases; a mutant that passes is a suite failure (see
tests/test_mutants.py). Registered with kind "mutant", so runs skip them unless asked
(`--include-mutants` or `--impl <name>`).
"""

from __future__ import annotations

from kernels.causal_conv1d.tiled import Bug, backward_tiled
from suite.registry import implementation


def _mutant(name: str, bug: Bug, symptom: str):
    def fn(**kw):
        backward_tiled(**kw, bugs=frozenset({bug}))

    fn.__doc__ = f"{bug.value}: {symptom}"
    fn.__name__ = name
    implementation("causal_conv1d", name, kind="mutant", deterministic=True)(fn)
    return fn


missing_right_halo = _mutant(
    "mutant_missing_right_halo", Bug.NO_RIGHT_HALO,
    "dx wrong in the last K-1 positions of every tile but the last")
halo_twice_in_dweight = _mutant(
    "mutant_halo_twice_in_dweight", Bug.HALO_IN_DWEIGHT,
    "dx right, dweight too large by the halo outputs, growing with the number of tiles")
missing_dfinal_path = _mutant(
    "mutant_missing_dfinal_path", Bug.NO_DFINAL,
    "dx wrong in the last K-1 positions and dinitial_states wrong when L < K-1, only "
    "with final states (chunked runs)")
mask_crosses_boundary = _mutant(
    "mutant_mask_crosses_boundary", Bug.MASK_IGNORED_IN_DX,
    "dx wrong next to packed-sequence boundaries")

ALL = (missing_right_halo, halo_twice_in_dweight, missing_dfinal_path, mask_crosses_boundary)
