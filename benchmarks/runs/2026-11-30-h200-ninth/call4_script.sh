#!/usr/bin/env bash
# ninth session, call 4: the landed build at HEAD (kernels as in the eighth session; the
# suite now times a same-bytes copy per case): gpu profile + op tests + the tools' GPU test,
# the perf tables of both ops beside Liger and PyTorch; the harness's roofline/results tests
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_COMMIT=$(cat .commit)
W=/tmp/w; mkdir -p $W; start=$SECONDS
pack() { tar czf $OUT/r.tgz -C $W --exclude cache . 2>/dev/null; }
OUT=$W OPS="layer_norm softmax" PYTEST_TIMEOUT=130 RUN_TIMEOUT=150 bash scripts/gpu_ops.sh > $W/gpu_ops.log 2>&1
echo "gpu_ops $((SECONDS-start))s"; grep -E "^pytest|passed|failed|^perf|frac copy|^layer_norm |^softmax " $W/gpu_ops.log | cut -c1-230; pack
PYTHONPATH=. timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_roofline.py tests/test_results.py tests/test_summary.py > $W/pytest_harness.log 2>&1
echo "harness tests exit $? $(tail -1 $W/pytest_harness.log)"; echo "total $((SECONDS-start))s"; pack
