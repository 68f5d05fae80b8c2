#!/usr/bin/env bash
# call 3: adamw host table prefetch variants on 4000 tensors; pytest exit after the profiler
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_CACHE=/tmp/cache PYTHONPATH=.
start=$SECONDS; deadline=${DEADLINE:-330}
L=/tmp/logs; mkdir -p $L
lim() { local l=$(( deadline - (SECONDS - start) - ${2:-15} )); [ $l -lt 1 ] && l=1; [ $l -lt $1 ] && echo $l || echo $1; }
at() { echo "[$((SECONDS - start)) s] $*"; }
python3 -m suite calibrate > $L/calibrate.log 2>&1; tail -n1 $L/calibrate.log; at calibrated
timeout -s INT -k 15 $(lim 260 40) python3 scripts/kernel_variants.py --op adamw --variants .gpu/adamw_v3.toml --with torch_fused --repeats 2 --case tiny-4000 --output $OUT/variants_tiny.parquet > $L/variants.log 2>&1
at "variants exit $?"; grep -v "^frame\|^'" $L/variants.log | grep -v "exp_avg_sq mismatch" | tail -n 16 | cut -c1-200
( time TEARDOWN_CUPTI=0 timeout $(lim 35 2) python3 -m pytest -q -p no:cacheprovider tests/harness/test_launches.py ) > $L/exit.log 2>&1
at "launch tests (TEARDOWN_CUPTI=0) exit $?"; tail -n 4 $L/exit.log
tar czf $OUT/logs.tgz -C /tmp logs; at end
