#!/usr/bin/env bash
# fourteenth session, call 6 (commit in .commit): the softmax perf profile, every
# implementation, 20 determinism repeats, for the report's side-by-side table
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_COMMIT=$(cat .commit)
W=/tmp/w14_6; rm -rf $W; mkdir -p $W; start=$SECONDS
pack() { tar czf $OUT/r.tgz -C $W --exclude cache .; }
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/liger_kernel-*.whl > $W/liger.log 2>&1
export BWD_SUITE_CACHE=$W/cache PYTHONPATH=.:/tmp/site
python3 -m suite prebuild --op softmax --impl cuda > $W/prebuild.log 2>&1; echo "prebuild $? $((SECONDS-start))s"
timeout $((200 - SECONDS + start)) python3 -m suite run --profile perf --op softmax --repeats 20 --quiet \
  --output $W/perf_softmax.parquet > $W/run_perf_softmax.log 2>&1
echo "perf softmax $? $((SECONDS-start))s"; tail -6 $W/run_perf_softmax.log | cut -c1-160; pack
