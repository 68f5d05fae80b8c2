#!/usr/bin/env bash
# eighth session, call 1: Liger LayerNorm adapter on the GPU, ln_bwd_cols and softmax C = 1 variants, ncu softmax ours/Liger
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_COMMIT=$(cat .commit)
W=/tmp/w; mkdir -p $W; start=$SECONDS; el() { echo "$((SECONDS-start))s"; }
pack() { tar czf $OUT/r.tgz -C $W --exclude cache . 2>/dev/null; }
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/liger_kernel-*.whl > $W/liger.log 2>&1
export PYTHONPATH=.:/tmp/site BWD_SUITE_CACHE=/tmp/cache
python3 -m suite prebuild --impl cuda > $W/prebuild.log 2>&1; echo "prebuilt $(el)"
LOGS=$W REPEATS=3 PEERS=liger VARIANT_TIMEOUT=200 bash scripts/gpu_variants.sh softmax=benchmarks/variants/softmax_c1.toml layer_norm=benchmarks/variants/layer_norm_cols4.toml; echo "variants $(el)"; pack
timeout 120 python3 -m pytest -n 6 -q -p no:cacheprovider cases tests/test_layer_norm*.py tests/test_ncu_case.py --suite-op layer_norm > $W/pytest_ln.log 2>&1; echo "pytest ln $? $(el)"; tail -3 $W/pytest_ln.log | cut -c1-300; pack
for spec in "layer_norm liger M4096-N8192-bf16" "layer_norm cuda M4096-N8192-bf16" "layer_norm liger M8192-N1024-bf16"; do
  set -- $spec; echo "== $spec"; timeout 60 python3 scripts/ncu_case.py --op $1 --impl $2 --case $3 --timeline 2>&1 | grep -vi warn | cut -c1-160
done > $W/timeline.log 2>&1; echo "timeline $(el)"; cat $W/timeline.log; pack
for impl in cuda liger; do
  timeout 90 ncu --section LaunchStats --section Occupancy --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
    -k regex:softmax --launch-skip 2 --launch-count 1 python3 scripts/ncu_case.py --op softmax --impl $impl --case R4096-N8192-bf16 > $W/ncu_softmax_$impl.txt 2>&1
  echo "ncu $impl $? $(el)"; grep -E "Registers Per|Achieved Occupancy|Theoretical Occupancy|DRAM Throughput|Duration|Issued Ipc|Block Limit Reg|Block Limit Shared|Local" $W/ncu_softmax_$impl.txt | head -14
done; pack
echo "total $(el)"
