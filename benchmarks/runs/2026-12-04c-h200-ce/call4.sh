#!/usr/bin/env bash
# call 4: CE at HEAD's kernel (8 commit groups for clusters): gpu profile, GPU tests, the perf table with Liger and torch_ref
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_CACHE=/tmp/cache PYTHONPATH=. BWD_SUITE_COMMIT=${COMMIT:-unknown}
start=$SECONDS; deadline=${DEADLINE:-420}
L=/tmp/logs; mkdir -p $L
lim() { local l=$(( deadline - (SECONDS - start) - ${2:-15} )); [ $l -lt 1 ] && l=1; [ $l -lt $1 ] && echo $l || echo $1; }
at() { echo "[$((SECONDS - start)) s] $*"; }
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/liger_kernel-*.whl && export PYTHONPATH=".:/tmp/site"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader
python3 -m suite prebuild --op cross_entropy > $L/prebuild_ce.log 2>&1 &
python3 -m suite calibrate > $L/calibrate.log 2>&1 &
wait; tail -qn1 $L/prebuild_ce.log | cut -c1-300; tail -n1 $L/calibrate.log; at prebuilt
timeout -s INT -k 10 $(lim 60 300) python3 -m suite run --op cross_entropy --profile gpu --impl cuda --no-timing --repeats 2 --quiet --output $OUT/gpu_ce.parquet > $L/run_gpu_ce.log 2>&1
at "ce gpu exit $?"; grep -v "^frame\|^'" $L/run_gpu_ce.log | grep -E "^cross_entropy|^run " | cut -c1-200
( time timeout $(lim 60 280) python3 -m pytest -q -p no:cacheprovider tests/cross_entropy/test_cuda_kernel.py tests/cross_entropy/test_in_place.py -rfE ) > $L/gpu_tests_ce.log 2>&1
at "ce gpu tests exit $?"; grep -E "passed|failed|^FAILED|^E |^real" $L/gpu_tests_ce.log | head -12 | cut -c1-250
timeout -s INT -k 10 $(lim 300 5) python3 -m suite run --op cross_entropy --profile perf --impl cuda,liger,torch_ref --repeats 2 --quiet --output $OUT/ce_perf.parquet > $L/ce_perf.log 2>&1
at "perf exit $?"; grep -v "^frame\|^'" $L/ce_perf.log | grep -E "^cross_entropy|^run " | cut -c1-220
tar czf $OUT/logs.tgz -C /tmp logs; at end
