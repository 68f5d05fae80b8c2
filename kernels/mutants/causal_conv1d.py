"""Deliberately broken causal conv1d backwards: each plants one bug of seed 000's symptom
table (and a few more a port gets wrong) into the tiled model
(kernels/causal_conv1d/tiled.py), one `Bug` switch each.

The suite must fail every one on the default CI cases (mutation score 100%), and its
diagnosis should name the planted cause: each mutant's function carries
`planted_cause`, a value of `ops.causal_conv1d_causes.Cause`, which
`python -m bwd_suite mutants` and tests/harness/test_mutants.py compare with the diagnosis.
Registered with kind "mutant", so runs skip them unless asked (`--include-mutants`,
`--impl <name>` or `python -m bwd_suite mutants`).
"""

from __future__ import annotations

from dataclasses import dataclass

from bwd_suite.kernels.causal_conv1d.tiled import TILE, Bug, backward_tiled
from bwd_suite.kernels.mutants import Mutant, register
from bwd_suite.ops.causal_conv1d_causes import Cause


@dataclass(frozen=True)
class TiledMutant(Mutant):
    tile: int = TILE  # the model's tile length


def _register(m: Mutant):
    return register("causal_conv1d", m, lambda m, **kw: backward_tiled(
        **kw, tile=m.tile, bugs=frozenset({m.bug})))


missing_right_halo = _register(TiledMutant(
    "mutant_missing_right_halo", Bug.NO_RIGHT_HALO, Cause.RIGHT_HALO,
    "dx wrong in the last K-1 positions of every 64-step tile but the last; dweight, "
    "dbias right"))
missing_right_halo_tile128 = _register(TiledMutant(
    "mutant_missing_right_halo_tile128", Bug.NO_RIGHT_HALO, Cause.RIGHT_HALO,
    "dx wrong in the last K-1 positions of every 128-step tile (Dao's tile for L > 128) "
    "but the last", tile=128))
halo_twice_in_dweight = _register(TiledMutant(
    "mutant_halo_twice_in_dweight", Bug.HALO_IN_DWEIGHT, Cause.HALO_IN_DWEIGHT,
    "dx right; dweight too large by the halo outputs' contribution, growing with the "
    "number of tiles; only when L > 64"))
missing_dfinal_path = _register(TiledMutant(
    "mutant_missing_dfinal_path", Bug.NO_DFINAL, Cause.DFINAL_PATH,
    "dx wrong in the last K-1 positions (of the sequence, and of every chunk in chunked "
    "runs) by exactly -dfinal_states; dinitial_states wrong when L < K-1"))
mask_crosses_boundary = _register(TiledMutant(
    "mutant_mask_crosses_boundary", Bug.MASK_IGNORED_IN_DX, Cause.PACKED_MASK,
    "dx wrong within K-1 steps before packed-sequence boundaries; dweight, dbias right"))
silu_recompute_without_bias = _register(TiledMutant(
    "mutant_silu_recompute_without_bias", Bug.SILU_NO_BIAS, Cause.SILU_RECOMPUTE_BIAS,
    "every output wrong everywhere, only with SiLU and bias; SiLU without bias and "
    "activation none pass"))
wrong_silu_derivative = _register(TiledMutant(
    "mutant_wrong_silu_derivative", Bug.SILU_WRONG_DERIVATIVE, Cause.SILU_DERIVATIVE,
    "every output wrong everywhere, only with SiLU (with or without bias)"))
silu_recompute_missing_right_halo = _register(TiledMutant(
    "mutant_silu_recompute_missing_right_halo", Bug.SILU_NO_INPUT_HALO,
    Cause.SILU_HALO_RECOMPUTE,
    "dx wrong in the last K-1 positions of every tile but the last, only with SiLU; the "
    "error is not minus the halo's contribution (the halo is read, its delta is wrong)"))
dfinal_times_weight = _register(TiledMutant(
    "mutant_dfinal_times_weight", Bug.DFINAL_TIMES_WEIGHT, Cause.DFINAL_SCALED,
    "dx wrong in the last K-1 positions (and at chunk edges) by (w[K-1]-1) x dfinal_states, "
    "only with a dfinal_states gradient"))
dfinal_times_silu_derivative = _register(TiledMutant(
    "mutant_dfinal_times_silu_derivative", Bug.DFINAL_TIMES_SILU_GRAD, Cause.DFINAL_SCALED,
    "dx wrong in the last K-1 positions (and at chunk edges) by (silu'-1) x dfinal_states, "
    "only with SiLU and a dfinal_states gradient"))
short_seq_state_dropped = _register(TiledMutant(
    "mutant_short_seq_state_dropped", Bug.SHORT_SEQ_NO_STATE, Cause.SHORT_SEQ_STATE,
    "dx (and dinitial_states) wrong only when a call is shorter than K-1 with a "
    "dfinal_states gradient (short sequences, chunks of 1-2 steps); L >= K-1 passes"))
dinit_missing_dfinal_path = _register(TiledMutant(
    "mutant_dinit_missing_dfinal_path", Bug.DINIT_NO_DFINAL, Cause.DINIT_DFINAL,
    "dinitial_states wrong in the slots i >= L, only when L < K-1 with initial and final "
    "states; in chunked runs the dx before a short chunk"))
mask_source_id = _register(TiledMutant(
    "mutant_mask_source_id", Bug.MASK_SOURCE_ID, Cause.PACKED_MASK,
    "dx wrong within K-1 steps of packed-sequence boundaries (and of the sequence start "
    "without initial states), only with seq_idx"))
seq_idx_ignored_in_dweight = _register(TiledMutant(
    "mutant_seq_idx_ignored_in_dweight", Bug.DWEIGHT_NO_MASK, Cause.DWEIGHT_MASK,
    "dx and dbias right; dweight off by the taps across packed boundaries, only with "
    "seq_idx"))
padding_not_masked = _register(TiledMutant(
    "mutant_padding_not_masked", Bug.PADDING_NOT_MASKED, Cause.PADDING,
    "dx wrong at padding positions, dweight and dbias wrong, only with padding ids"))
batch_lost_in_dweight = _register(TiledMutant(
    "mutant_batch_lost_in_dweight", Bug.DWEIGHT_BATCH0_ONLY, Cause.BATCH_REDUCTION,
    "dx and dbias right; dweight misses the contributions of batches > 0; batch 1 passes"))
tail_gradients_not_zeroed = _register(TiledMutant(
    "mutant_tail_gradients_not_zeroed", Bug.TAIL_NOT_ZEROED, Cause.OUT_OF_RANGE,
    "dx wrong in the last K-1 positions of the sequence (and of every chunk), also "
    "without final states; packed runs pass (ids past the end are padding)"))
channel_tail_dweight_dropped = _register(TiledMutant(
    "mutant_channel_tail_dweight_dropped", Bug.CL_TAIL_DWEIGHT, Cause.CHANNEL_TAIL,
    "dweight wrong in the channels past the last full vector of 8, only channel-last with "
    "dim not a multiple of 8"))

ALL = (missing_right_halo, missing_right_halo_tile128, halo_twice_in_dweight,
       missing_dfinal_path, mask_crosses_boundary, silu_recompute_without_bias,
       wrong_silu_derivative, silu_recompute_missing_right_halo, dfinal_times_weight,
       dfinal_times_silu_derivative, short_seq_state_dropped, dinit_missing_dfinal_path,
       mask_source_id, seq_idx_ignored_in_dweight, padding_not_masked, batch_lost_in_dweight,
       tail_gradients_not_zeroed, channel_tail_dweight_dropped)
