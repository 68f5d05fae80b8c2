#!/usr/bin/env bash
# eighth session, call 3: the landed float2 warp sums (LayerNorm): gpu profile + op tests, sanitizers, perf table, timeline
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_COMMIT=$(cat .commit)
W=/tmp/w; mkdir -p $W; start=$SECONDS; el() { echo "$((SECONDS-start))s"; }
pack() { tar czf $OUT/r.tgz -C $W --exclude cache . 2>/dev/null; }
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/liger_kernel-*.whl > $W/liger.log 2>&1
export PYTHONPATH=.:/tmp/site
OUT=$W OPS="layer_norm" SANITIZE=1 PYTEST_TIMEOUT=130 RUN_TIMEOUT=130 bash scripts/gpu_ops.sh > $W/gpu_ops.log 2>&1
echo "gpu_ops $(el)"; grep -E "^pytest|^sanitizer|passed|failed|^perf|frac copy|^layer_norm " $W/gpu_ops.log | cut -c1-220; pack
for c in M4096-N8192-bf16 M8192-N1024-bf16; do BWD_SUITE_CACHE=$W/cache timeout 40 python3 scripts/ncu_case.py --op layer_norm --impl cuda --case $c --timeline 2>&1 | grep -vi warn | cut -c1-150; done > $W/timeline.log 2>&1
cat $W/timeline.log; echo "total $(el)"; pack
