#!/usr/bin/env bash
# ninth session, call 1: softmax split_nodrop at 4096x8192 beside cuda and Liger (twice, for
# the run-to-run spread), LayerNorm row_pairs on the perf profile, then both on the gpu profile
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_COMMIT=$(cat .commit)
W=/tmp/w; mkdir -p $W; start=$SECONDS
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/liger_kernel-*.whl > $W/liger.log 2>&1
export PYTHONPATH=.:/tmp/site
pack() { tar czf $OUT/r.tgz -C $W --exclude cache .; }
BWD_SUITE_CACHE=$W/cache LOGS=$W/a REPEATS=3 PEERS=liger VARIANT_TIMEOUT=150 bash scripts/gpu_variants.sh softmax=benchmarks/variants/softmax_split_nodrop.toml@4096x8192 layer_norm=benchmarks/variants/layer_norm_row_pairs.toml
echo "perf $((SECONDS-start))s"; pack
BWD_SUITE_CACHE=$W/cache LOGS=$W/b REPEATS=3 PEERS=liger VARIANT_TIMEOUT=100 bash scripts/gpu_variants.sh softmax=benchmarks/variants/softmax_split_nodrop.toml@4096x8192 layer_norm=benchmarks/variants/layer_norm_row_pairs.toml@4096x8192 2>&1 | tail -30
echo "perf2 $((SECONDS-start))s"; pack
BWD_SUITE_CACHE=$W/cache LOGS=$W/gpu PROFILE=gpu REPEATS=2 VARIANT_TIMEOUT=150 bash scripts/gpu_variants.sh layer_norm=benchmarks/variants/layer_norm_row_pairs.toml softmax=benchmarks/variants/softmax_split_nodrop.toml 2>&1 | grep -E "exit|items|^softmax|^layer_norm|fail|error|FAIL" | head -30
echo "total $((SECONDS-start))s"; pack
