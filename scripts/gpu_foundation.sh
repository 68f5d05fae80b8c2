#!/usr/bin/env bash
# One device call: calibrate, the test suite on the GPU (gpu profile), the main job on
# the gpu profile and the perf profile, each writing under $OUT.
set -uo pipefail
export PYTHONPATH=. PYTHONUNBUFFERED=1 BWD_SUITE_CACHE="$OUT/cache"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$OUT/nvidia-smi.txt"
git rev-parse --short=12 HEAD > "$OUT/commit.txt" 2>/dev/null || true
python3 -m bwd_suite calibrate 2>&1 | tee "$OUT/calibrate.log"
timeout "${PYTEST_TIMEOUT:-240}" python3 -m pytest -n 4 -q -p no:cacheprovider tests cases \
  > "$OUT/pytest.log" 2>&1; echo "pytest exit $?" | tee -a "$OUT/pytest.log"; tail -25 "$OUT/pytest.log"
python3 -m bwd_suite run --impl torch_ref --samples 10 --max-time 0.3 --quiet \
  --output "$OUT/gpu.parquet" > "$OUT/run_gpu.log" 2>&1; echo "run gpu exit $?"; tail -12 "$OUT/run_gpu.log"
python3 -m bwd_suite run --profile perf --impl torch_ref,torch_tiled --quiet \
  --output "$OUT/perf.parquet" > "$OUT/run_perf.log" 2>&1; echo "run perf exit $?"; tail -12 "$OUT/run_perf.log"
