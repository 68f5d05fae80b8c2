#!/usr/bin/env bash
# call 1: adamw host probe, GPU tests, gpu-profile correctness, perf (gpt2, tiny), pass-2 variants
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
timeout $(lim 120) python3 .gpu/probe_adamw.py > $L/probe.log 2>&1
at "probe exit $?"; grep -v "^-\|^ *$" $L/probe.log | grep -E "n=|pinned|python|adamw_kernel|Memcpy|cudaLaunch|cudaMemcpy|aten::|Self CPU|Self CUDA|error|Error" | head -40 | cut -c1-200
timeout $(lim 60) python3 -m pytest -q -p no:cacheprovider tests/adamw/test_cuda_kernel.py tests/harness/test_launches.py -rfE > $L/gpu_tests.log 2>&1
at "gpu tests exit $?"; grep -E "passed|failed|^FAILED|^E " $L/gpu_tests.log | head -12 | cut -c1-250
timeout -s INT -k 15 $(lim 120) python3 -m suite run --op adamw --profile gpu --no-timing --repeats 2 --quiet --output $OUT/gpu_adamw.parquet > $L/run_gpu_adamw.log 2>&1
at "adamw gpu exit $?"; grep -v "^frame\|^'" $L/run_gpu_adamw.log | grep -v "^ *exp_avg_sq mismatch" | tail -n 14 | cut -c1-220
timeout -s INT -k 15 $(lim 200) python3 -m suite run --op adamw --profile perf --case gpt2 --case tiny --repeats 2 --quiet --output $OUT/perf_adamw.parquet > $L/run_perf_adamw.log 2>&1
at "perf adamw exit $?"; grep -v "^frame\|^'" $L/run_perf_adamw.log | grep -v "^ *exp_avg_sq mismatch" | tail -n 30 | cut -c1-250
timeout -s INT -k 15 $(lim 300 25) python3 scripts/kernel_variants.py --op adamw --variants .gpu/adamw_variants.toml --with torch_fused --repeats 2 --case n268435456-fp32-plain --case n268435456-bf16-master-plain --case gpt2_large-fp32-plain --output $OUT/variants_adamw.parquet > $L/variants.log 2>&1
at "variants exit $?"; grep -v "^frame\|^'" $L/variants.log | tail -n 30 | cut -c1-200
tar czf $OUT/logs.tgz -C /tmp logs; at end
