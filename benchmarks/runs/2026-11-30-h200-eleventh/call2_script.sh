#!/usr/bin/env bash
# eleventh session, call 2: the pacing probe (call2_probe.py), then the LayerNorm
# cols_beside variants at 4096x8192 again with the twin
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_COMMIT=$(cat .commit)
W=/tmp/w; mkdir -p $W; start=$SECONDS
pack() { tar czf $OUT/r.tgz -C $W --exclude cache .; }
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/liger_kernel-*.whl > $W/liger.log 2>&1
export PYTHONPATH=.:/tmp/site BWD_SUITE_CACHE=$W/cache
python3 -c "from kernels.softmax.cuda import extension; extension()" > $W/prebuild.log 2>&1; echo "build $? $((SECONDS-start))s"
timeout 300 python3 call2_probe.py $W/probe.json > $W/probe.log 2>&1; echo "probe $? $((SECONDS-start))s"; pack
