#!/usr/bin/env bash
# twelfth session, call 1: the review's _time_cuda refactor under tests/test_timing.py;
# softmax fp32 split rows (benchmarks/variants/softmax_fp32_split.toml) beside the shipped
# kernel, Liger and the twin at the 4096x8192 cases, twice
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_COMMIT=$(cat .commit)
W=/tmp/w; mkdir -p $W; start=$SECONDS
pack() { tar czf $OUT/r.tgz -C $W --exclude cache .; }
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/liger_kernel-*.whl > $W/liger.log 2>&1
export PYTHONPATH=.:/tmp/site BWD_SUITE_CACHE=$W/cache
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_timing.py > $W/pytest_timing.log 2>&1
tail -3 $W/pytest_timing.log; echo "timing $((SECONDS-start))s"; pack
for k in a b; do
  LOGS=$W/$k REPEATS=3 PEERS=liger TWIN=1 VARIANT_TIMEOUT=170 bash scripts/gpu_variants.sh \
    softmax=benchmarks/variants/softmax_fp32_split.toml@4096x8192 2>&1 | grep -E "^variants|^cuda|^liger|rror" | cut -c1-160
  echo "$k $((SECONDS-start))s"; pack
done
