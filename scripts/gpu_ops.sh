#!/usr/bin/env bash
# One device call for the layer_norm and softmax ops: install the carried Liger wheel,
# build our CUDA kernels, then per op the gpu profile as pytest items and the perf profile
# as one timed run of every implementation, all under $OUT.
#   device run: OPS="layer_norm softmax" bash scripts/gpu_ops.sh     (carry: .whl)
set -uo pipefail
export PYTHONPATH=. PYTHONUNBUFFERED=1 BWD_SUITE_CACHE="$OUT/cache"
if ls .whl/liger_kernel-*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/liger_kernel-*.whl \
    && export PYTHONPATH=".:/tmp/site"
fi
python3 -m suite prebuild 2>&1 | tee "$OUT/prebuild.log"   # our CUDA kernels, before any timing
python3 -m suite calibrate
python3 -m suite list | grep -E "liger|torch_ref" | cut -c1-160
for op in ${OPS:-layer_norm softmax}; do
  timeout "${PYTEST_TIMEOUT:-200}" python3 -m pytest -n 6 -q -p no:cacheprovider cases \
    --suite-op "$op" > "$OUT/pytest_$op.log" 2>&1
  echo "pytest $op exit $?"; tail -6 "$OUT/pytest_$op.log" | cut -c1-300
  timeout "${RUN_TIMEOUT:-200}" python3 -m suite run --profile perf --op "$op" --quiet \
    --output "$OUT/perf_$op.parquet" > "$OUT/run_perf_$op.log" 2>&1
  echo "perf $op exit $?"; tail -8 "$OUT/run_perf_$op.log" | cut -c1-300
done
