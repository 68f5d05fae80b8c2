#!/usr/bin/env bash
# eleventh session, call 6: softmax fp32 rows of 2048 vectors at 3 blocks an SM
# (benchmarks/variants/softmax_fp32_three_blocks.toml) beside the shipped kernel, Liger
# and the twin, at the 4096x8192 cases, twice
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_COMMIT=$(cat .commit)
W=/tmp/w; mkdir -p $W; start=$SECONDS
pack() { tar czf $OUT/r.tgz -C $W --exclude cache .; }
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/liger_kernel-*.whl > $W/liger.log 2>&1
export PYTHONPATH=.:/tmp/site BWD_SUITE_CACHE=$W/cache
for k in a b; do
  LOGS=$W/$k REPEATS=3 PEERS=liger TWIN=1 VARIANT_TIMEOUT=150 bash scripts/gpu_variants.sh \
    softmax=benchmarks/variants/softmax_fp32_three_blocks.toml@4096x8192 2>&1 | grep -E "^variants|^cuda|^liger" | cut -c1-150
  echo "$k $((SECONDS-start))s"; pack
done
