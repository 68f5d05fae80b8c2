#!/usr/bin/env bash
# eighth session, call 2: the landed build (C = 1 softmax rows, float4 ln_bwd_cols): gpu profile + op tests, sanitizers, perf tables; then two variants
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_COMMIT=$(cat .commit)
W=/tmp/w; mkdir -p $W; start=$SECONDS; el() { echo "$((SECONDS-start))s"; }
pack() { tar czf $OUT/r.tgz -C $W --exclude cache . 2>/dev/null; }
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/liger_kernel-*.whl > $W/liger.log 2>&1
export PYTHONPATH=.:/tmp/site
OUT=$W OPS="layer_norm softmax" SANITIZE=1 PYTEST_TIMEOUT=130 RUN_TIMEOUT=130 bash scripts/gpu_ops.sh > $W/gpu_ops.log 2>&1
echo "gpu_ops $(el)"; grep -E "^pytest|^sanitizer|passed|failed|^perf|frac copy|^layer_norm |^softmax " $W/gpu_ops.log | cut -c1-220; pack
BWD_SUITE_CACHE=$W/cache LOGS=$W REPEATS=3 PEERS=liger VARIANT_TIMEOUT=100 bash scripts/gpu_variants.sh layer_norm=benchmarks/variants/layer_norm_pairsum.toml softmax=benchmarks/variants/softmax_ld.toml@targets
echo "variants $(el)"; pack
