#!/usr/bin/env bash
# One device call for the layer_norm and softmax ops: install the carried Liger wheel,
# build our CUDA kernels, then per op the gpu profile as pytest items plus the op's tests
# (tests/<op>/; with the first op also tests/scripts/test_ncu_case.py), with
# compute-sanitizer on the smoke cases alongside when SANITIZE=1, and last, alone on the
# GPU, the perf profile as one timed run of every implementation; all under $OUT.
#   device run: OPS="layer_norm softmax" [SANITIZE=1] bash scripts/gpu_ops.sh   (carry: .whl)
#   SANITIZE_TOOLS (default "memcheck racecheck synccheck"), SANITIZE_IMPLS (default cuda),
#   REPEATS (determinism repeats of the perf run, default 20), IMPLS (perf run: only these,
#   comma-separated; default every implementation of the op), L2_FLUSH (perf run: the
#   suite's --l2-flush, default clean), WARMUP_MS (perf run: --warmup-ms, default 25)
set -uo pipefail
export PYTHONPATH=. PYTHONUNBUFFERED=1 BWD_SUITE_CACHE="$OUT/cache"
if ls .whl/liger_kernel-*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/liger_kernel-*.whl \
    && export PYTHONPATH=".:/tmp/site"
fi
python3 -m bwd_suite prebuild 2>&1 | tee "$OUT/prebuild.log"   # our CUDA kernels, before any timing
python3 -m bwd_suite calibrate
python3 -m bwd_suite list | grep -E "liger|torch_ref" | cut -c1-160
pids=()
if [ -n "${SANITIZE:-}" ]; then  # out-of-bounds, shared-memory races, barrier misuse
  for op in ${OPS:-layer_norm softmax}; do for tool in ${SANITIZE_TOOLS:-memcheck racecheck synccheck}; do
    (timeout 240 compute-sanitizer --tool $tool --error-exitcode 9 python3 -m bwd_suite run \
       --profile smoke --op "$op" --impl "${SANITIZE_IMPLS:-cuda}" --no-timing --repeats 1 \
       --quiet --out "/tmp/san_${op}_$tool" > "$OUT/sanitize_${op}_$tool.log" 2>&1
     echo "sanitizer $tool $op exit $? $(grep -h 'ERROR SUMMARY' "$OUT/sanitize_${op}_$tool.log")") &
    pids+=($!)
  done; done
fi
# the op's GPU tests (tests/<op>/), besides its cases; the tools' GPU tests
# (scripts/ncu_case.py's timeline) once, with the first op
op_tests() { ls -d tests/"$1" 2>/dev/null; }
tool_tests=tests/scripts/test_ncu_case.py
for op in ${OPS:-layer_norm softmax}; do
  timeout "${PYTEST_TIMEOUT:-200}" python3 -m pytest -n 6 -q -p no:cacheprovider cases \
    $(op_tests "$op") $tool_tests --suite-op "$op" > "$OUT/pytest_$op.log" 2>&1
  echo "pytest $op exit $?"; tail -6 "$OUT/pytest_$op.log" | cut -c1-300
  tool_tests=""
done
[ ${#pids[@]} -gt 0 ] && wait "${pids[@]}"
for op in ${OPS:-layer_norm softmax}; do
  timeout "${RUN_TIMEOUT:-200}" python3 -m bwd_suite run --profile perf --op "$op" --quiet ${IMPLS:+--impl "$IMPLS"} \
    ${L2_FLUSH:+--l2-flush "$L2_FLUSH"} ${WARMUP_MS:+--warmup-ms "$WARMUP_MS"} --repeats "${REPEATS:-20}" --output "$OUT/perf_$op.parquet" \
    > "$OUT/run_perf_$op.log" 2>&1
  echo "perf $op exit $?"; tail -12 "$OUT/run_perf_$op.log" | cut -c1-300
done
