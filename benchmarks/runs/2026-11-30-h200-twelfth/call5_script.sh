#!/usr/bin/env bash
# twelfth session, call 5: where LayerNorm 4096x8192 bf16's time goes, against 16384x4096
# bf16 (0.79-0.80 vs 0.91 of the copy bandwidth, same kernels): the suite's timing under
# torch.profiler (kernels, gaps, time outside the kernels), then Nsight Compute on the main
# kernel and on ln_bwd_cols
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_COMMIT=$(cat .commit) PYTHONPATH=.
W=/tmp/w5; mkdir -p $W; start=$SECONDS
export BWD_SUITE_CACHE=$W/cache
pack() { tar czf $OUT/r.tgz -C $W --exclude cache .; }
python3 -c "from kernels.layer_norm.cuda import extension; extension()" > $W/build.log 2>&1; echo "build $? $((SECONDS-start))s"
for c in M4096-N8192-bf16 M16384-N4096-bf16; do
  echo "== $c"; timeout 60 python3 scripts/ncu_case.py --op layer_norm --impl cuda --case $c --timeline 2>&1 | grep -vi warn | cut -c1-160
done > $W/timeline.log 2>&1; echo "timeline $((SECONDS-start))s"; cat $W/timeline.log; pack
for c in M4096-N8192-bf16 M16384-N4096-bf16; do
  timeout 100 ncu --section LaunchStats --section Occupancy --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
    -k regex:"ln_bwd" --launch-skip 4 --launch-count 2 python3 scripts/ncu_case.py --op layer_norm --impl cuda --case $c > $W/ncu_$c.txt 2>&1
  echo "ncu $c $? $((SECONDS-start))s"; grep -E "ln_bwd_|Duration|DRAM Throughput|L2 Cache Throughput|Compute \(SM\) Throughput|Issued Ipc|No Eligible|Warp Cycles Per Issued|Achieved Occupancy" $W/ncu_$c.txt | head -24
  pack
done
