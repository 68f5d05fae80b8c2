#!/usr/bin/env bash
# call 2: harness host probe on 4000 tensors, gpu tests exit, perf: 2^28 all dtypes, tiny-4000, gpt2 fp32 under the scaler
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_CACHE=/tmp/cache PYTHONPATH=.
start=$SECONDS; deadline=${DEADLINE:-570}
L=/tmp/logs; mkdir -p $L
lim() { local l=$(( deadline - (SECONDS - start) - ${2:-20} )); [ $l -lt 1 ] && l=1; [ $l -lt $1 ] && echo $l || echo $1; }
at() { echo "[$((SECONDS - start)) s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader
python3 -m suite prebuild --op adamw > $L/prebuild_adamw.log 2>&1 &
python3 -m suite calibrate > $L/calibrate.log 2>&1 &
wait; tail -qn1 $L/prebuild_adamw.log | cut -c1-200; tail -n1 $L/calibrate.log; at prebuilt
timeout $(lim 90) python3 .gpu/probe2.py > $L/probe2.log 2>&1
at "probe2 exit $?"; grep -v "^ *$" $L/probe2.log | head -80 | cut -c1-220
timeout -s INT -k 15 $(lim 100) python3 -m suite run --op adamw --profile perf --case tiny --repeats 2 --quiet --output $OUT/perf_tiny.parquet > $L/run_perf_tiny.log 2>&1
at "perf tiny exit $?"; grep -v "^frame\|^'" $L/run_perf_tiny.log | grep -v "^ *exp_avg_sq mismatch\|^  FAIL torch_fused" | tail -n 12 | cut -c1-250
timeout -s INT -k 15 $(lim 400) python3 -m suite run --op adamw --profile perf --case 2p28 --case gpt2_large-fp32 --repeats 2 --quiet --output $OUT/perf_adamw.parquet > $L/run_perf_adamw.log 2>&1
at "perf adamw exit $?"; grep -v "^frame\|^'" $L/run_perf_adamw.log | grep -v "^ *exp_avg_sq mismatch\|^  FAIL torch_fused" | tail -n 20 | cut -c1-250
( time timeout 45 python3 -m pytest -q -p no:cacheprovider tests/harness/test_launches.py -rfE ) > $L/gpu_tests.log 2>&1
at "launch tests exit $?"; tail -n 5 $L/gpu_tests.log
tar czf $OUT/logs.tgz -C /tmp logs; at end
