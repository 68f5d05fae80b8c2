#!/usr/bin/env bash
# fourteenth session, call 4: softmax_fp32_c2_128.toml (fp32 rows of 129-256 vectors at
# C = 2 on 128 threads) beside the shipped kernel, Liger and the twin at the N1024 perf
# cases, twice; then the gpu profile of the variants
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_COMMIT=$(cat .commit)
W=/tmp/w14_4; rm -rf $W; mkdir -p $W; start=$SECONDS
pack() { tar czf $OUT/r.tgz -C $W --exclude cache .; }
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/liger_kernel-*.whl > $W/liger.log 2>&1
export BWD_SUITE_CACHE=$W/cache PYTHONPATH=.:/tmp/site
S=benchmarks/variants/softmax_fp32_c2_128.toml
for run in a b; do
  LOGS=$W/sm_$run REPEATS=3 PEERS=liger TWIN=1 VARIANT_TIMEOUT=150 bash scripts/gpu_variants.sh softmax=$S@N1024 2>&1 \
    | grep -E "^variants|rror|^softmax" | cut -c1-170
  echo "sm $run $((SECONDS-start))s"; pack
done
LOGS=$W/gpu REPEATS=2 PROFILE=gpu VARIANT_TIMEOUT=150 bash scripts/gpu_variants.sh softmax=$S 2>&1 \
  | grep -E "^variants|fail|rror|^softmax" | cut -c1-200 | tail -8
echo "gpu $((SECONDS-start))s"; pack
