#!/usr/bin/env bash
# tenth session, call 5 (clean L2 flush): softmax variants measured before behind the dirty
# flush (split_nodrop, load/store hints, plain loads) on the six target cases beside Liger;
# LayerNorm even_grid on the perf profile and twice more at 4096x8192
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_COMMIT=$(cat .commit)
W=/tmp/w; mkdir -p $W; start=$SECONDS
pack() { tar czf $OUT/r.tgz -C $W --exclude cache .; }
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/liger_kernel-*.whl > $W/liger.log 2>&1
export PYTHONPATH=.:/tmp/site BWD_SUITE_CACHE=$W/cache
LOGS=$W/a REPEATS=3 PEERS=liger VARIANT_TIMEOUT=150 bash scripts/gpu_variants.sh softmax=benchmarks/runs/2026-11-30-h200-ninth/variants/softmax_split_nodrop.toml@targets- softmax=benchmarks/runs/2026-11-30-h200-ninth/variants/softmax_hints.toml@targets- softmax=benchmarks/runs/2026-11-30-h200-eighth/variants/softmax_ld.toml@targets- layer_norm=benchmarks/variants/layer_norm_even_grid.toml 2>&1 | grep -E "^variants|^cuda|^liger" | cut -c1-150
echo "a $((SECONDS-start))s"; pack
for k in b; do
  left=$((380 - (SECONDS-start))); [ $left -lt 60 ] && break
  LOGS=$W/$k REPEATS=3 PEERS=liger VARIANT_TIMEOUT=$((left/2)) bash scripts/gpu_variants.sh layer_norm=benchmarks/variants/layer_norm_even_grid.toml@4096x8192 softmax=benchmarks/runs/2026-11-30-h200-ninth/variants/softmax_split_nodrop.toml@4096x8192 2>&1 | grep -E "^cuda|^liger" | cut -c1-150
  echo "$k $((SECONDS-start))s"; pack
done
