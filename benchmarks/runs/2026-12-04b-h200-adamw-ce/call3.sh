#!/usr/bin/env bash
# call 3: CE perf table with Liger and torch_ref, the load-balancing cluster policy variant
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_CACHE=/tmp/cache PYTHONPATH=.
start=$SECONDS; deadline=${DEADLINE:-480}
L=/tmp/logs; mkdir -p $L
lim() { local l=$(( deadline - (SECONDS - start) - ${2:-20} )); [ $l -lt 1 ] && l=1; [ $l -lt $1 ] && echo $l || echo $1; }
at() { echo "[$((SECONDS - start)) s] $*"; }
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/liger_kernel-*.whl && export PYTHONPATH=".:/tmp/site"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader
python3 -m suite prebuild --op cross_entropy > $L/prebuild_ce.log 2>&1 &
python3 -m suite calibrate > $L/calibrate.log 2>&1 &
wait; tail -qn1 $L/prebuild_ce.log | cut -c1-200; tail -n1 $L/calibrate.log; at prebuilt
python3 -m suite list --op cross_entropy | grep -E "liger" | cut -c1-120
timeout -s INT -k 15 $(lim 420) python3 scripts/kernel_variants.py --op cross_entropy --variants .gpu/ce_lb.toml --twin --with liger,torch_ref --repeats 2 --case llm-vocab --output $OUT/ce_perf.parquet > $L/ce_perf.log 2>&1
at "ce perf exit $?"; grep -v "^frame\|^'" $L/ce_perf.log | tail -n 16 | cut -c1-220
tar czf $OUT/logs.tgz -C /tmp logs; at end
