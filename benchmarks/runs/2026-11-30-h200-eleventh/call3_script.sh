#!/usr/bin/env bash
# eleventh session, call 3: the pacing probe (call3_probe.py: hold against spacer, same
# run), the GPU tests of suite.timing and suite.roofline, then the perf profile of
# layer_norm and softmax, every implementation, as the suite runs it now
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_COMMIT=$(cat .commit)
W=/tmp/w; mkdir -p $W; start=$SECONDS
pack() { tar czf $OUT/r.tgz -C $W --exclude cache .; }
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/liger_kernel-*.whl > $W/liger.log 2>&1
export PYTHONPATH=.:/tmp/site BWD_SUITE_CACHE=$W/cache
(python3 -c "from kernels.layer_norm.cuda import extension; extension()" > $W/build_ln.log 2>&1; echo "build ln $?") &
python3 -c "from kernels.softmax.cuda import extension; extension()" > $W/build_softmax.log 2>&1; echo "build softmax $? $((SECONDS-start))s"
wait; echo "builds $((SECONDS-start))s"
python3 -m suite calibrate
timeout 150 python3 call3_probe.py $W/probe.json > $W/probe.log 2>&1; echo "probe $? $((SECONDS-start))s"; pack
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_timing.py tests/test_roofline.py > $W/pytest_timing.log 2>&1
echo "pytest timing $? $((SECONDS-start))s"; tail -2 $W/pytest_timing.log | cut -c1-300; pack
for op in softmax layer_norm; do
  timeout 150 python3 -m suite run --profile perf --op $op --quiet --repeats 5 --output $W/perf_$op.parquet > $W/run_perf_$op.log 2>&1
  echo "perf $op exit $? $((SECONDS-start))s"; tail -14 $W/run_perf_$op.log | cut -c1-200; pack
done
