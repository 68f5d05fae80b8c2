#!/usr/bin/env bash
# twelfth session, call 6: LayerNorm 16-bit piped rows at 32 elements a thread
# (benchmarks/variants/layer_norm_pt32.toml: pt32, pt32_8k) beside the shipped kernel,
# Liger and the twin at the six perf cases; then the gpu profile through both variants
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_COMMIT=$(cat .commit)
W=/tmp/w6; mkdir -p $W; start=$SECONDS
pack() { tar czf $OUT/r.tgz -C $W --exclude cache .; }
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/liger_kernel-*.whl > $W/liger.log 2>&1
export PYTHONPATH=.:/tmp/site BWD_SUITE_CACHE=$W/cache
LOGS=$W/perf REPEATS=3 PEERS=liger TWIN=1 VARIANT_TIMEOUT=200 bash scripts/gpu_variants.sh \
  layer_norm=benchmarks/variants/layer_norm_pt32.toml 2>&1 | grep -E "^variants|^cuda|^liger|rror|^layer_norm" | cut -c1-170
echo "perf $((SECONDS-start))s"; pack
LOGS=$W/gpu REPEATS=2 PROFILE=gpu VARIANT_TIMEOUT=120 bash scripts/gpu_variants.sh \
  layer_norm=benchmarks/variants/layer_norm_pt32.toml 2>&1 | grep -E "^variants|fail|rror|^layer_norm" | cut -c1-200 | tail -30
echo "gpu $((SECONDS-start))s"; pack
