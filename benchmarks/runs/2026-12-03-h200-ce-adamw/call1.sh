#!/usr/bin/env bash
# call 1: Dao build (background) + correctness of adamw, cross_entropy (resident kernel), findings
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_CACHE=/tmp/cache
start=$SECONDS; deadline=${DEADLINE:-565}
L=/tmp/logs; mkdir -p $L
lim() { local l=$(( deadline - (SECONDS - start) - ${2:-25} )); [ $l -lt 1 ] && l=1; [ $l -lt $1 ] && echo $l || echo $1; }
at() { echo "[$((SECONDS - start)) s] $*"; }
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/liger_kernel-*.whl
export PYTHONPATH=.:/tmp/site
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
git log -1 --format=%h 2>/dev/null; git status --short | head -5
(MAX_JOBS=9 bash scripts/install_dao.sh .whl/causal_conv1d-1.7.0.tar.gz > $L/dao_build.log 2>&1; echo "dao build exit $? at $((SECONDS - start)) s" >> $L/dao_build.log) &
dao=$!
pids=()
for op in adamw cross_entropy causal_conv1d layer_norm softmax; do python3 -m suite prebuild --op $op > $L/prebuild_$op.log 2>&1 & pids+=($!); done
python3 -m suite calibrate > $L/calibrate.log 2>&1 & pids+=($!)
wait "${pids[@]}"; tail -qn1 $L/prebuild_*.log | cut -c1-200; tail -n1 $L/calibrate.log; at prebuilt
timeout $(lim 100) python3 -m pytest -q -p no:cacheprovider tests/adamw/test_cuda_kernel.py tests/cross_entropy/test_cuda_kernel.py tests/harness/test_launches.py tests/harness/test_peak_memory.py -rfE > $L/gpu_tests.log 2>&1
at "gpu tests exit $?"; grep -E "passed|failed|^FAILED|^E " $L/gpu_tests.log | head -20 | cut -c1-250
timeout $(lim 130) python3 -m pytest -n 8 -q -p no:cacheprovider cases --suite-op cross_entropy --suite-impl cuda,torch_ref,torch_fp32,liger -rfEX > $L/pytest_ce.log 2>&1
at "pytest ce exit $?"; grep -E "^(FAILED|XPASS|ERROR)" $L/pytest_ce.log | cut -c1-220 | head -20; tail -n1 $L/pytest_ce.log
timeout -s INT -k 15 $(lim 170) python3 scripts/kernel_variants.py --op cross_entropy --variants benchmarks/variants/ce_resident.toml --repeats 2 --output $L/variants_ce.parquet > $L/variants_ce.log 2>&1
at "ce variants exit $?"; grep -v "^frame\|^'" $L/variants_ce.log | tail -n 30 | cut -c1-250
timeout -s INT -k 15 $(lim 130) python3 -m suite run --op adamw --profile gpu --no-timing --repeats 2 --quiet --output $L/gpu_adamw.parquet > $L/run_adamw.log 2>&1
at "adamw gpu exit $?"; grep -v "^frame\|^'" $L/run_adamw.log | tail -n 14 | cut -c1-220
timeout $(lim 90) python3 -m pytest -n 8 -q -p no:cacheprovider cases/causal_conv1d/findings.toml cases/layer_norm/findings.toml cases/softmax/findings.toml --suite-impl cuda,torch_ref,liger -rfEX > $L/pytest_findings.log 2>&1
at "findings exit $?"; grep -E "^(FAILED|XPASS|ERROR)" $L/pytest_findings.log | cut -c1-220 | head; tail -n1 $L/pytest_findings.log
while kill -0 $dao 2>/dev/null && [ $((SECONDS - start)) -lt $((deadline - 150)) ]; do sleep 5; done
tail -n2 $L/dao_build.log
if python3 -c "import torch, causal_conv1d_cuda" 2>/dev/null; then
  bash scripts/dao_site.sh pack $OUT > $L/dao_pack.log 2>&1; at "pack exit $?"; cat $L/dao_pack.log
  timeout $(lim 60) python3 -m pytest -n 8 -q -p no:cacheprovider cases/causal_conv1d/findings.toml --suite-impl dao,dao_det -rfEX > $L/pytest_dao_findings.log 2>&1
  at "dao findings exit $?"; grep -E "^(FAILED|XPASS|ERROR)" $L/pytest_dao_findings.log | cut -c1-220 | head; tail -n1 $L/pytest_dao_findings.log
  timeout $(lim 400 20) python3 -m pytest -n 12 -q -p no:cacheprovider cases --suite-op causal_conv1d --suite-impl dao,dao_det -rfEX > $L/pytest_dao.log 2>&1
  at "dao gpu profile exit $?"; grep -E "^(FAILED|XPASS|ERROR)" $L/pytest_dao.log | cut -c1-220 | head -20; tail -n1 $L/pytest_dao.log
else
  at "dao not importable"; tail -n 20 $L/dao_build.log
fi
tar czf $OUT/logs.tgz -C /tmp logs; ls -la $OUT; at end
