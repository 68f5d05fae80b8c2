#!/usr/bin/env bash
# session 2026-12-04c call 1: CE persistent cluster kernel: gpu profile, GPU tests, variants
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_CACHE=/tmp/cache PYTHONPATH=. BWD_SUITE_COMMIT=${COMMIT:-unknown}
start=$SECONDS; deadline=${DEADLINE:-575}
L=/tmp/logs; mkdir -p $L
lim() { local l=$(( deadline - (SECONDS - start) - ${2:-15} )); [ $l -lt 1 ] && l=1; [ $l -lt $1 ] && echo $l || echo $1; }
at() { echo "[$((SECONDS - start)) s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader
python3 -m suite prebuild --op cross_entropy > $L/prebuild_ce.log 2>&1 &
python3 -m suite calibrate > $L/calibrate.log 2>&1 &
wait; tail -qn3 $L/prebuild_ce.log | cut -c1-300; tail -n1 $L/calibrate.log; at prebuilt
timeout -s INT -k 10 $(lim 150 300) python3 -m suite run --op cross_entropy --profile gpu --impl cuda --no-timing --repeats 2 --quiet --output $OUT/gpu_ce.parquet > $L/run_gpu_ce.log 2>&1
at "ce gpu exit $?"; grep -v "^frame\|^'" $L/run_gpu_ce.log | tail -n 12 | cut -c1-250
( time timeout $(lim 80 250) python3 -m pytest -q -p no:cacheprovider tests/cross_entropy/test_cuda_kernel.py tests/cross_entropy/test_in_place.py -rfE ) > $L/gpu_tests_ce.log 2>&1
at "ce gpu tests exit $?"; grep -E "passed|failed|^FAILED|^E |^real" $L/gpu_tests_ce.log | head -12 | cut -c1-250
timeout -s INT -k 10 $(lim 330) python3 scripts/kernel_variants.py --op cross_entropy --variants .gpu/ce_persist.toml --twin --repeats 2 --case V128256 --case V151936 --case T8192-V32000 --output $OUT/ce_persist.parquet > $L/ce_persist.log 2>&1
at "variants exit $?"; grep -v "^frame\|^'" $L/ce_persist.log | tail -n 14 | cut -c1-220
tar czf $OUT/logs.tgz -C /tmp logs; at end
