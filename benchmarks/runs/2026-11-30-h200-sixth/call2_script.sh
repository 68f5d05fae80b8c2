#!/usr/bin/env bash
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_CACHE=/tmp/cache BWD_SUITE_COMMIT=$(cat .commit)
W=/tmp/w; mkdir -p $W; start=$SECONDS; el() { echo "$((SECONDS-start))s"; }
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/liger_kernel-*.whl > $W/liger.log 2>&1
export PYTHONPATH=.:/tmp/site
python3 -m suite prebuild --impl cuda > $W/prebuild.log 2>&1; echo "prebuild $? $(el)"
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem,launch__occupancy_limit_warps,launch__occupancy_limit_blocks,launch__block_size,launch__grid_size,smsp__issue_active.avg.per_cycle_active,smsp__inst_executed.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__waves_per_multiprocessor,launch__shared_mem_per_block_dynamic
prof() {  # op impl case
  timeout 90 ncu --clock-control none --metrics $M --csv python3 scripts/ncu_case.py --op $1 --impl $2 --case $3 --launches 1 > $W/ncu_$1_$2_$3.csv 2> $W/ncu_$1_$2_$3.err
  echo "ncu $1 $2 $3 $? $(el)"
}
for c in B8-D4096-L2048-K4-bf16-cf B2-D8192-L8192-K4-bf16-cf B8-D4096-L2048-K4-bf16-cl B16-D1536-L4096-K3-bf16-cl B2-D8192-L8192-K4-bf16-cl B4-D2048-L512-K4-bf16-cl B4-D2048-L512-K4-bf16-cf B8-D4096-L2048-K4-fp32-cf; do prof causal_conv1d cuda $c; done
for c in R4096-N8192-fp32 R4096-N8192-bf16 R8192-N1024-bf16 R8192-N1024-fp32 R16384-N4096-bf16; do for i in cuda liger; do prof softmax $i $c; done; done
for c in M4096-N8192-bf16 M16384-N4096-bf16; do prof layer_norm cuda $c; done
# sources of the LayerNorm bf16 kernel's instructions
case=M4096-N8192-bf16
timeout 90 ncu --clock-control none -k regex:ln_bwd_piped --launch-count 1 --section SourceCounters --section WarpStateStats --section SchedulerStats --section Occupancy --section SpeedOfLight --import-source yes -o $W/ln_$case python3 scripts/ncu_case.py --op layer_norm --impl cuda --case $case --launches 1 > /dev/null 2>&1
ncu --import $W/ln_$case.ncu-rep --page source --csv --print-source sass > $W/src_ln_$case.csv 2>&1
ncu --import $W/ln_$case.ncu-rep --page details > $W/det_ln_$case.txt 2>&1; rm -f $W/ln_$case.ncu-rep; echo "ncu ln source $(el)"
# SASS: our softmax and LayerNorm extensions, Liger's Triton cubins
for so in $(find /tmp/cache -name "*.so"); do b=$(basename $so .so); cuobjdump -sass $so 2>/dev/null | gzip > $W/sass_$b.txt.gz; done
find ~/.triton /tmp -name "*softmax*backward*.cubin" 2>/dev/null | head -5 | while read f; do cuobjdump -sass $f | gzip > $W/sass_triton_$(basename $f .cubin)_$(basename $(dirname $f) | cut -c1-6).txt.gz; done
find ~/.triton -name "*softmax*backward*.json" 2>/dev/null | head -5 | while read f; do cp $f $W/triton_$(basename $(dirname $f) | cut -c1-6)_$(basename $f); done
ls $W; echo "total $(el)"
tar czf $OUT/r.tgz -C $W --exclude cache .
