#!/usr/bin/env bash
# eleventh session, call 1: (a) the order effect: softmax and LayerNorm target cases, the
# shipped kernel timed first (cuda) and last (cuda+twin) beside Liger, with the old warm-up
# (3 calls, --warmup-ms 0) and the new (25 ms), twice each, alternating; (b) the LayerNorm
# cols_beside variants with the twin; (c) GPU tests of suite.timing and the softmax split-rows cases
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_COMMIT=$(cat .commit)
W=/tmp/w; mkdir -p $W; start=$SECONDS
pack() { tar czf $OUT/r.tgz -C $W --exclude cache .; }
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/liger_kernel-*.whl > $W/liger.log 2>&1
export PYTHONPATH=.:/tmp/site BWD_SUITE_CACHE=$W/cache
python3 -m suite calibrate
kv() { timeout "$1" python3 scripts/kernel_variants.py "${@:2}"; }
kv 240 --op softmax --twin --with liger --warmup-ms 0 --case targets --output $W/order_softmax_wm0_a.parquet > $W/order_softmax_wm0_a.log 2>&1
echo "softmax wm0 a $? $((SECONDS-start))s"; pack
kv 100 --op softmax --twin --with liger --warmup-ms 25 --case targets --output $W/order_softmax_wm25_a.parquet > $W/order_softmax_wm25_a.log 2>&1
echo "softmax wm25 a $? $((SECONDS-start))s"; pack
(timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_timing.py > $W/pytest_timing.log 2>&1; echo "pytest timing $?") 
tail -2 $W/pytest_timing.log
timeout 100 python3 -m pytest -n 6 -q -p no:cacheprovider cases --suite-op softmax --suite-profile gpu -k split-rows > $W/pytest_split_rows.log 2>&1
echo "pytest split-rows $? $((SECONDS-start))s"; tail -2 $W/pytest_split_rows.log | cut -c1-300; pack
kv 240 --op layer_norm --variants benchmarks/variants/layer_norm_cols_beside.toml --twin --with liger --case 4096x8192 --case 8192x1024 --output $W/variants_ln_cols_beside.parquet > $W/variants_ln_cols_beside.log 2>&1
echo "ln cols_beside $? $((SECONDS-start))s"; pack
kv 100 --op softmax --twin --with liger --warmup-ms 0 --case targets --output $W/order_softmax_wm0_b.parquet > $W/order_softmax_wm0_b.log 2>&1
echo "softmax wm0 b $? $((SECONDS-start))s"; pack
kv 100 --op softmax --twin --with liger --warmup-ms 25 --case targets --output $W/order_softmax_wm25_b.parquet > $W/order_softmax_wm25_b.log 2>&1
echo "softmax wm25 b $? $((SECONDS-start))s"; pack
