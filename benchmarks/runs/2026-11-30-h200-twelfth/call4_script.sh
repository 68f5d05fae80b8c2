#!/usr/bin/env bash
# twelfth session, call 4: the timing's retry change on the GPU (tests/test_timing.py and
# the results/regression tests); then the final perf runs at this commit: softmax twice,
# layer_norm twice (20 repeats, every implementation)
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_COMMIT=$(cat .commit)
W=/tmp/w4; mkdir -p $W; start=$SECONDS
pack() { tar czf $OUT/r.tgz -C $W --exclude cache .; }
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/liger_kernel-*.whl > $W/liger.log 2>&1
export PYTHONPATH=.:/tmp/site BWD_SUITE_CACHE=$W/cache
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_timing.py tests/test_results.py tests/test_regression.py > $W/pytest_timing.log 2>&1
echo "pytest exit $? $((SECONDS-start))s"; tail -3 $W/pytest_timing.log | cut -c1-300; pack
python3 -m suite prebuild > $W/prebuild.log 2>&1; echo "prebuild exit $? $((SECONDS-start))s"
python3 -m suite calibrate
for k in a b; do for op in softmax layer_norm; do
  timeout 170 python3 -m suite run --profile perf --op $op --quiet --repeats 20 --output $W/perf_${op}_$k.parquet > $W/run_perf_${op}_$k.log 2>&1
  echo "perf $op $k exit $? $((SECONDS-start))s"; grep -E "^$op +(cuda|liger|torch_ref) " $W/run_perf_${op}_$k.log | cut -c1-200; pack
done; done
