#!/usr/bin/env bash
# eighth session, call 5: softmax split variant at 4096x8192 beside cuda and Liger, then its gpu profile (correctness)
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_COMMIT=$(cat .commit)
W=/tmp/w; mkdir -p $W; start=$SECONDS
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/liger_kernel-*.whl > $W/liger.log 2>&1
export PYTHONPATH=.:/tmp/site
BWD_SUITE_CACHE=$W/cache LOGS=$W REPEATS=3 PEERS=liger VARIANT_TIMEOUT=150 bash scripts/gpu_variants.sh softmax=benchmarks/variants/softmax_split.toml@4096x8192
echo "perf $((SECONDS-start))s"; tar czf $OUT/r.tgz -C $W --exclude cache .
mkdir -p $W/gpu; BWD_SUITE_CACHE=$W/cache LOGS=$W/gpu PROFILE=gpu REPEATS=2 VARIANT_TIMEOUT=120 bash scripts/gpu_variants.sh softmax=benchmarks/variants/softmax_split.toml 2>&1 | grep -E "exit|items|^softmax|fail|error" | head -12
echo "total $((SECONDS-start))s"; tar czf $OUT/r.tgz -C $W --exclude cache .
