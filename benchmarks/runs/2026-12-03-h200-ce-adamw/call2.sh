#!/usr/bin/env bash
# call 2: CE persistent resident kernel correctness + CE perf variants with peers + adamw perf (gpt2, tiny)
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_CACHE=/tmp/cache
start=$SECONDS; deadline=${DEADLINE:-475}
L=/tmp/logs; mkdir -p $L
lim() { local l=$(( deadline - (SECONDS - start) - ${2:-20} )); [ $l -lt 1 ] && l=1; [ $l -lt $1 ] && echo $l || echo $1; }
at() { echo "[$((SECONDS - start)) s] $*"; }
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/liger_kernel-*.whl
export PYTHONPATH=.:/tmp/site
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
pids=()
for op in adamw cross_entropy; do python3 -m suite prebuild --op $op > $L/prebuild_$op.log 2>&1 & pids+=($!); done
python3 -m suite calibrate > $L/calibrate.log 2>&1 & pids+=($!)
wait "${pids[@]}"; tail -qn1 $L/prebuild_*.log | cut -c1-200; tail -n1 $L/calibrate.log; at prebuilt
timeout $(lim 45) python3 -m pytest -q -p no:cacheprovider tests/cross_entropy/test_cuda_kernel.py -rfE > $L/gpu_tests.log 2>&1
at "ce gpu tests exit $?"; grep -E "passed|failed|^FAILED|^E " $L/gpu_tests.log | head -20 | cut -c1-250
timeout $(lim 70) python3 -m pytest -n 8 -q -p no:cacheprovider cases --suite-op cross_entropy --suite-impl cuda -rfEX > $L/pytest_ce.log 2>&1
at "pytest ce exit $?"; grep -E "^(FAILED|XPASS|ERROR)" $L/pytest_ce.log | cut -c1-220 | head -20; tail -n1 $L/pytest_ce.log
timeout -s INT -k 15 $(lim 170) python3 -m suite run --op adamw --profile perf --case gpt2 --case tiny --repeats 3 --quiet --output $OUT/perf_adamw.parquet > $L/run_perf_adamw.log 2>&1
at "perf adamw exit $?"; grep -v "^frame\|^'" $L/run_perf_adamw.log | tail -n 24 | cut -c1-250
timeout -s INT -k 15 $(lim 400 25) python3 scripts/kernel_variants.py --op cross_entropy --variants .gpu/ce_two.toml --with liger,torch_ref --repeats 3 --output $OUT/perf_ce_variants.parquet > $L/variants_ce.log 2>&1
at "ce variants exit $?"; grep -v "^frame\|^'" $L/variants_ce.log | grep -E "^(cuda|liger|torch)" | cut -c1-120
tar czf $OUT/logs.tgz -C /tmp logs; ls -la $OUT; at end
