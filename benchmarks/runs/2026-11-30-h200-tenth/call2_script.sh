#!/usr/bin/env bash
# tenth session, call 2: LayerNorm tail variants (even_grid, ws_direct, both) on the perf
# profile beside cuda and Liger, then twice more at 4096x8192
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_COMMIT=$(cat .commit)
W=/tmp/w; mkdir -p $W; start=$SECONDS
pack() { tar czf $OUT/r.tgz -C $W --exclude cache .; }
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/liger_kernel-*.whl > $W/liger.log 2>&1
export PYTHONPATH=.:/tmp/site BWD_SUITE_CACHE=$W/cache
LOGS=$W/a REPEATS=3 PEERS=liger VARIANT_TIMEOUT=280 bash scripts/gpu_variants.sh layer_norm=benchmarks/variants/layer_norm_tail.toml
echo "perf $((SECONDS-start))s"; pack
for k in b c; do
LOGS=$W/$k REPEATS=3 PEERS=liger VARIANT_TIMEOUT=100 bash scripts/gpu_variants.sh layer_norm=benchmarks/variants/layer_norm_tail.toml@4096x8192 2>&1 | tail -8
echo "$k $((SECONDS-start))s"; pack
done
