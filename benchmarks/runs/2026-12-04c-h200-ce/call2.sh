#!/usr/bin/env bash
# call 2: CE: HEAD's kernel vs the persistent one in one run; ncu of the persistent one
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_CACHE=/tmp/cache PYTHONPATH=. BWD_SUITE_COMMIT=${COMMIT:-unknown}
start=$SECONDS; deadline=${DEADLINE:-400}
L=/tmp/logs; mkdir -p $L
lim() { local l=$(( deadline - (SECONDS - start) - ${2:-15} )); [ $l -lt 1 ] && l=1; [ $l -lt $1 ] && echo $l || echo $1; }
at() { echo "[$((SECONDS - start)) s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader
python3 -m suite prebuild --op cross_entropy > $L/prebuild_ce.log 2>&1 &
python3 -m suite calibrate > $L/calibrate.log 2>&1 &
wait; tail -qn1 $L/prebuild_ce.log | cut -c1-300; tail -n1 $L/calibrate.log; at prebuilt
timeout -s INT -k 10 $(lim 240 80) python3 scripts/kernel_variants.py --op cross_entropy --variants .gpu/ce_head.toml --twin --repeats 2 --case T8192-V128256 --case T8192-V151936 --case T8192-V32000 --output $OUT/ce_head.parquet > $L/ce_head.log 2>&1
at "variants exit $?"; grep -v "^frame\|^'" $L/ce_head.log | tail -n 12 | cut -c1-220
c=B1-T8192-V128256
timeout $(lim 70) ncu --clock-control none -k regex:ce_cluster --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
    python3 scripts/ncu_case.py --op cross_entropy --impl cuda --case $c > $L/ncu_$c.log 2>&1
at "ncu $c exit $?"; grep -E "Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Theoretical Occupancy|Stall|Cluster|Warp Cycles|Eligible|Issued Warp|Block Limit|Waves|Grid Size|Registers" $L/ncu_$c.log | head -40 | cut -c1-160
tar czf $OUT/logs.tgz -C /tmp logs; at end
