#!/usr/bin/env bash
# fourteenth session, call 3 (commit in .commit): (a) softmax against torch.add's
# two-reads-one-write bound (call3_bound.py); (b) conv1d perf profile, cuda (reduce as a
# programmatic dependent launch) beside Dao's default and deterministic modes
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_COMMIT=$(cat .commit)
W=/tmp/w14_3; rm -rf $W; mkdir -p $W; start=$SECONDS
pack() { tar czf $OUT/r.tgz -C $W --exclude cache .; }
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/liger_kernel-*.whl > $W/liger.log 2>&1
bash scripts/dao_site.sh unpack .dao /tmp/dao > $W/dao_unpack.log 2>&1; echo "dao unpack $?"
export BWD_SUITE_CACHE=$W/cache PYTHONPATH=.:/tmp/site:/tmp/dao
python3 -m suite prebuild --impl cuda > $W/prebuild.log 2>&1; echo "prebuild $? $((SECONDS-start))s"
python3 -m suite calibrate
timeout 150 python3 call3_bound.py > $W/bound.log 2>&1; echo "bound $? $((SECONDS-start))s"; tail -9 $W/bound.log | cut -c1-200; pack
timeout 260 python3 -m suite run --profile perf --op causal_conv1d --impl cuda,dao,dao_det --repeats 3 --quiet \
  --output $W/conv1d_perf.parquet > $W/conv1d_perf.log 2>&1
echo "conv1d perf $? $((SECONDS-start))s"; grep -E "^causal_conv1d|^op " $W/conv1d_perf.log | cut -c1-160; pack
