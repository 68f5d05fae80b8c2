#!/usr/bin/env bash
# call 3: CE: HEAD's kernel vs the persistent one in one run; ncu of the persistent one
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_CACHE=/tmp/cache PYTHONPATH=. BWD_SUITE_COMMIT=${COMMIT:-unknown}
start=$SECONDS; deadline=${DEADLINE:-380}
L=/tmp/logs; mkdir -p $L
lim() { local l=$(( deadline - (SECONDS - start) - ${2:-15} )); [ $l -lt 1 ] && l=1; [ $l -lt $1 ] && echo $l || echo $1; }
at() { echo "[$((SECONDS - start)) s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader
python3 -m suite prebuild --op cross_entropy > $L/prebuild_ce.log 2>&1 &
python3 -m suite calibrate > $L/calibrate.log 2>&1 &
wait; tail -qn1 $L/prebuild_ce.log | cut -c1-300; tail -n1 $L/calibrate.log; at prebuilt
timeout -s INT -k 10 $(lim 60 280) python3 -m suite run --op cross_entropy --profile gpu --impl cuda --no-timing --repeats 2 --quiet --output $OUT/gpu_ce.parquet > $L/run_gpu_ce.log 2>&1
at "ce gpu exit $?"; grep -v "^frame\|^'" $L/run_gpu_ce.log | tail -n 4 | cut -c1-250
( time timeout $(lim 60 260) python3 -m pytest -q -p no:cacheprovider tests/cross_entropy/test_cuda_kernel.py tests/cross_entropy/test_in_place.py -rfE ) > $L/gpu_tests_ce.log 2>&1
at "ce gpu tests exit $?"; grep -E "passed|failed|^FAILED|^E |^real" $L/gpu_tests_ce.log | head -12 | cut -c1-250
timeout -s INT -k 10 $(lim 300 5) python3 scripts/kernel_variants.py --op cross_entropy --variants .gpu/ce_head2.toml --repeats 2 --case T8192-V128256 --case T8192-V151936 --case T8192-V32000 --output $OUT/ce_head.parquet > $L/ce_head.log 2>&1
at "variants exit $?"; grep -v "^frame\|^'" $L/ce_head.log | tail -n 12 | cut -c1-220
tar czf $OUT/logs.tgz -C /tmp logs; at end
