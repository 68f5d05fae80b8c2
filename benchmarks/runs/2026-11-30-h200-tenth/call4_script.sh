#!/usr/bin/env bash
# tenth session, call 4: the clean L2 flush. GPU tests of the harness (timing, roofline,
# results, report, summary, regression), then gpu_ops.sh for layer_norm and softmax (gpu
# profile as pytest, perf profile timed after the default clean flush), then the perf
# profile again after the dirty flush (the previous method) as far as time allows
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_COMMIT=$(cat .commit)
W=/tmp/w; mkdir -p $W; start=$SECONDS
pack() { tar czf $OUT/r.tgz -C $W --exclude cache .; }
export PYTHONPATH=. BWD_SUITE_CACHE=$W/cache
timeout 100 python3 -m pytest -q -p no:cacheprovider tests/test_timing.py tests/test_roofline.py \
  tests/test_results.py tests/test_summary.py tests/test_regression.py tests/test_report.py > $W/pytest_harness.log 2>&1
echo "harness exit $? $((SECONDS-start))s"; tail -3 $W/pytest_harness.log
OUT=$W OPS="layer_norm softmax" PYTEST_TIMEOUT=130 RUN_TIMEOUT=150 bash scripts/gpu_ops.sh 2>&1 | tee $W/gpu_ops.log | grep -E "exit|passed|failed|frac|cuda |liger |torch" | cut -c1-200
echo "gpu_ops $((SECONDS-start))s"; pack
export PYTHONPATH=.:/tmp/site
for op in softmax layer_norm; do
  left=$((575 - (SECONDS-start))); [ $left -lt 40 ] && break
  timeout $left python3 -m suite run --profile perf --op $op --quiet --repeats 3 --l2-flush dirty \
    --output $W/perf_dirty_$op.parquet > $W/run_perf_dirty_$op.log 2>&1
  echo "dirty $op exit $? $((SECONDS-start))s"; tail -9 $W/run_perf_dirty_$op.log | cut -c1-200; pack
done
