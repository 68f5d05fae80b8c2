#!/usr/bin/env bash
# session 2026-12-04b call 1: adamw pass-1 unroll + warm restores; CE ncu profile
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_CACHE=/tmp/cache PYTHONPATH=.
start=$SECONDS; deadline=${DEADLINE:-575}
L=/tmp/logs; mkdir -p $L
lim() { local l=$(( deadline - (SECONDS - start) - ${2:-20} )); [ $l -lt 1 ] && l=1; [ $l -lt $1 ] && echo $l || echo $1; }
at() { echo "[$((SECONDS - start)) s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader
python3 -m suite prebuild --op adamw > $L/prebuild_adamw.log 2>&1 &
python3 -m suite prebuild --op cross_entropy > $L/prebuild_ce.log 2>&1 &
python3 -m suite calibrate > $L/calibrate.log 2>&1 &
wait; tail -qn1 $L/prebuild_adamw.log $L/prebuild_ce.log | cut -c1-200; tail -n1 $L/calibrate.log; at prebuilt
( time timeout $(lim 90) python3 -m pytest -q -p no:cacheprovider tests/adamw tests/harness/test_launches.py -rfE ) > $L/gpu_tests.log 2>&1
at "gpu tests exit $?"; grep -E "passed|failed|^FAILED|^E |^real" $L/gpu_tests.log | head -12 | cut -c1-250
timeout -s INT -k 15 $(lim 90) python3 -m suite run --op adamw --profile gpu --impl cuda --no-timing --repeats 2 --quiet --output $OUT/gpu_adamw.parquet > $L/run_gpu_adamw.log 2>&1
at "adamw gpu exit $?"; tail -n 8 $L/run_gpu_adamw.log | cut -c1-220
timeout -s INT -k 15 $(lim 230) python3 -m suite run --op adamw --profile perf --impl cuda,torch_fused --case gpt2 --case tiny --case 2p28-scaler --repeats 2 --quiet --output $OUT/perf_adamw.parquet > $L/run_perf_adamw.log 2>&1
at "perf adamw exit $?"; grep -v "^frame\|^'" $L/run_perf_adamw.log | grep -v "^ *exp_avg_sq mismatch\|^  FAIL torch_fused" | tail -n 24 | cut -c1-250
for c in B1-T8192-V128256 B1-T8192-V32000; do
  timeout $(lim 60) ncu --clock-control none -k regex:ce_resident --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
    python3 scripts/ncu_case.py --op cross_entropy --impl cuda --case $c > $L/ncu_$c.log 2>&1
  at "ncu $c exit $?"; grep -E "Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Theoretical Occupancy|Stall|Cluster|Warp Cycles|Eligible|Issued Warp|Block Limit|Waves" $L/ncu_$c.log | head -40 | cut -c1-160
done
tar czf $OUT/logs.tgz -C /tmp logs; at end
