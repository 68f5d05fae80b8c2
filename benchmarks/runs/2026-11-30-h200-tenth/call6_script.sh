#!/usr/bin/env bash
# tenth session, call 6: the landed softmax split rows. compute-sanitizer (memcheck,
# racecheck) on the smoke cases, the gpu profile and the softmax tests as pytest, then the
# perf profile of every implementation after the clean L2 flush
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_COMMIT=$(cat .commit)
W=/tmp/w; mkdir -p $W; start=$SECONDS
pack() { tar czf $OUT/r.tgz -C $W --exclude cache .; }
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/liger_kernel-*.whl > $W/liger.log 2>&1
export PYTHONPATH=.:/tmp/site BWD_SUITE_CACHE=$W/cache
python3 -c "from kernels.softmax.cuda import extension; extension()" > $W/prebuild.log 2>&1; echo "build $? $((SECONDS-start))s"
python3 -m suite calibrate
for tool in memcheck racecheck; do
  (timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 python3 -m suite run --profile smoke \
     --op softmax --impl cuda --no-timing --repeats 1 --quiet --out /tmp/san_$tool > $W/sanitize_$tool.log 2>&1
   echo "sanitizer $tool exit $? $(grep -h 'ERROR SUMMARY' $W/sanitize_$tool.log)") &
done
timeout 120 python3 -m pytest -n 6 -q -p no:cacheprovider cases tests/test_softmax_op.py tests/test_golden_softmax.py \
  --suite-op softmax > $W/pytest_softmax.log 2>&1
echo "pytest exit $? $((SECONDS-start))s"; tail -3 $W/pytest_softmax.log | cut -c1-300
wait; pack
left=$((330 - (SECONDS-start)))
timeout $left python3 -m suite run --profile perf --op softmax --quiet --repeats 5 \
  --output $W/perf_softmax.parquet > $W/run_perf_softmax.log 2>&1
echo "perf exit $? $((SECONDS-start))s"; tail -9 $W/run_perf_softmax.log | cut -c1-200; pack
