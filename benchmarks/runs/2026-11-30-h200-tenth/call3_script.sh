#!/usr/bin/env bash
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_COMMIT=$(cat .commit)
W=/tmp/w; mkdir -p $W; start=$SECONDS
pack() { tar czf $OUT/r.tgz -C $W --exclude cache .; }
export PYTHONPATH=. BWD_SUITE_CACHE=$W/cache
timeout 400 python3 call3_probe.py 2>&1 | tee $W/probe.log
echo "total $((SECONDS-start))s"; pack
