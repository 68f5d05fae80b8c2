#!/usr/bin/env bash
# eleventh session, call 5: the final check of the session's code (the warm-up of 25 ms,
# the hold): GPU tests of the harness, then scripts/gpu_ops.sh for layer_norm and softmax
# (build, the gpu profile and the ops' tests as pytest, the perf profile of every
# implementation with 20 determinism repeats)
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_COMMIT=$(cat .commit)
W=/tmp/w; mkdir -p $W; start=$SECONDS
pack() { tar czf $OUT/r.tgz -C $W --exclude cache .; }
export PYTHONPATH=. BWD_SUITE_CACHE=$W/cache
timeout 100 python3 -m pytest -q -p no:cacheprovider tests/test_timing.py tests/test_roofline.py tests/test_cli.py \
  tests/test_inputs.py tests/test_results.py tests/test_summary.py tests/test_regression.py tests/test_report.py > $W/pytest_harness.log 2>&1
echo "harness exit $? $((SECONDS-start))s"; tail -3 $W/pytest_harness.log | cut -c1-300; pack
OUT=$W OPS="layer_norm softmax" PYTEST_TIMEOUT=150 RUN_TIMEOUT=170 bash scripts/gpu_ops.sh 2>&1 | tee $W/gpu_ops.log | grep -E "exit|passed|failed|frac|cuda |liger |torch" | cut -c1-200
echo "done $((SECONDS-start))s"; pack
