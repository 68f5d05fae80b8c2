#!/usr/bin/env bash
# ninth session, call 2: clusters an H200 holds; LayerNorm fold4/fold2 (cluster-folded column
# sums) on the perf profile (twice at 4096x8192) and the gpu profile; copies of the perf
# cases' bytes through the suite's timing
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_COMMIT=$(cat .commit)
W=/tmp/w; mkdir -p $W; start=$SECONDS
pack() { tar czf $OUT/r.tgz -C $W --exclude cache .; }
nvcc -O2 -arch=sm_90 -o /tmp/clusters call2_clusters.cu && /tmp/clusters | tee $W/clusters.log
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/liger_kernel-*.whl > $W/liger.log 2>&1
export PYTHONPATH=.:/tmp/site BWD_SUITE_CACHE=$W/cache
LOGS=$W/a REPEATS=3 VARIANT_TIMEOUT=200 bash scripts/gpu_variants.sh layer_norm=benchmarks/variants/layer_norm_fold_cluster.toml
echo "perf $((SECONDS-start))s"; pack
timeout 90 python3 call2_probe.py 2>&1 | tee $W/probe.log
LOGS=$W/b REPEATS=3 VARIANT_TIMEOUT=100 bash scripts/gpu_variants.sh layer_norm=benchmarks/variants/layer_norm_fold_cluster.toml@4096x8192 2>&1 | tail -12
echo "perf2 $((SECONDS-start))s"; pack
LOGS=$W/gpu PROFILE=gpu REPEATS=2 VARIANT_TIMEOUT=150 bash scripts/gpu_variants.sh layer_norm=benchmarks/variants/layer_norm_fold_cluster.toml 2>&1 | grep -E "exit|items|^layer_norm|fail|error|FAIL" | head -30
grep -E "fail|error" $W/gpu/*.log | grep -v " 0 " | head -20
echo "total $((SECONDS-start))s"; pack
