#!/usr/bin/env bash
# call 2: CE fewer instructions an element (vs prev), CE gpu correctness, adamw tiny x3
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_CACHE=/tmp/cache PYTHONPATH=.
start=$SECONDS; deadline=${DEADLINE:-575}
L=/tmp/logs; mkdir -p $L
lim() { local l=$(( deadline - (SECONDS - start) - ${2:-20} )); [ $l -lt 1 ] && l=1; [ $l -lt $1 ] && echo $l || echo $1; }
at() { echo "[$((SECONDS - start)) s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader
python3 -m suite prebuild --op cross_entropy > $L/prebuild_ce.log 2>&1 &
python3 -m suite prebuild --op adamw > $L/prebuild_adamw.log 2>&1 &
python3 -m suite calibrate > $L/calibrate.log 2>&1 &
wait; tail -qn1 $L/prebuild_ce.log $L/prebuild_adamw.log | cut -c1-200; tail -n1 $L/calibrate.log; at prebuilt
timeout -s INT -k 15 $(lim 100) python3 -m suite run --op cross_entropy --profile gpu --impl cuda --no-timing --repeats 2 --quiet --output $OUT/gpu_ce.parquet > $L/run_gpu_ce.log 2>&1
at "ce gpu exit $?"; grep -v "^frame\|^'" $L/run_gpu_ce.log | tail -n 10 | cut -c1-220
( time timeout $(lim 60) python3 -m pytest -q -p no:cacheprovider tests/cross_entropy -rfE ) > $L/gpu_tests_ce.log 2>&1
at "ce gpu tests exit $?"; grep -E "passed|failed|^FAILED|^E |^real" $L/gpu_tests_ce.log | head -12 | cut -c1-250
timeout -s INT -k 15 $(lim 240 100) python3 scripts/kernel_variants.py --op cross_entropy --variants .gpu/ce_prev.toml --twin --repeats 2 --case llm-vocab --output $OUT/ce_variants.parquet > $L/ce_variants.log 2>&1
at "ce variants exit $?"; grep -v "^frame\|^'" $L/ce_variants.log | tail -n 12 | cut -c1-220
for k in 1 2 3; do
  timeout -s INT -k 15 $(lim 40) python3 -m suite run --op adamw --profile perf --impl cuda,torch_fused --case tiny --repeats 1 --quiet --output $OUT/tiny_$k.parquet > $L/run_tiny_$k.log 2>&1
  at "tiny $k exit $?"
done
tar czf $OUT/logs.tgz -C /tmp logs; at end
