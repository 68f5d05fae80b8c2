#!/usr/bin/env bash
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_COMMIT=$(cat .commit)
W=$OUT; start=$SECONDS; el() { echo "$((SECONDS-start))s"; }
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/liger_kernel-*.whl > $W/liger.log 2>&1
export PYTHONPATH=.:/tmp/site
(BWD_SUITE_CACHE=$OUT/cache python3 -m suite prebuild --impl cuda > $W/prebuild0.log 2>&1; echo "prebuilt $(el)") &
BWD_SUITE_CACHE=/tmp/cache LOGS=$W/var REPEATS=3 PEERS=liger,torch_ref VARIANT_TIMEOUT=280 bash scripts/gpu_variants.sh layer_norm=benchmarks/variants/layer_norm_cols.toml; echo "variants $(el)"
wait
OPS=layer_norm SANITIZE=1 PYTEST_TIMEOUT=180 RUN_TIMEOUT=150 bash scripts/gpu_ops.sh > $W/gpu_ops_ln.log 2>&1; echo "gpu_ops ln $(el)"; grep -E "pytest|sanitizer|passed|failed|frac|cuda |liger |torch" $W/gpu_ops_ln.log | cut -c1-200 | tail -30
BWD_SUITE_CACHE=$OUT/cache timeout 150 python3 -m suite run --profile perf --op softmax --quiet --repeats 20 --output $W/perf_softmax.parquet > $W/run_perf_softmax.log 2>&1; echo "softmax perf $? $(el)"; tail -12 $W/run_perf_softmax.log | cut -c1-200
rm -rf $OUT/cache; echo "total $(el)"
