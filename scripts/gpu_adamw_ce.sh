#!/usr/bin/env bash
# One device call for the adamw and cross_entropy ops: build our kernels, their GPU tests,
# then, alone on the GPU, the perf profile of each op (CASES narrows adamw's, e.g.
# "gpt2 tiny"), then the gpu profile's conformance of cross_entropy (Liger, ours, the
# torch forms) as pytest items; every step bounded so the call ends by DEADLINE seconds
# (default 560) with what finished: a run cut short keeps its finished rows.
#   device run: [CASES="gpt2 tiny"] [OPS="adamw cross_entropy"] bash scripts/gpu_adamw_ce.sh
#   carry: .whl (Liger's wheel; without it the liger items are unsupported, with the reason)
# Out: $OUT/perf_<op>.parquet, run and pytest logs.
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_CACHE=/tmp/cache
start=$SECONDS; deadline=${DEADLINE:-560}
# seconds for the next step: at most $1, and never past the deadline
lim() { local l=$(( deadline - (SECONDS - start) - 15 )); [ $l -lt 1 ] && l=1; [ $l -lt $1 ] && echo $l || echo $1; }
path=.
if ls .whl/liger_kernel-*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/liger_kernel-*.whl \
    && path="$path:/tmp/site"
fi
export PYTHONPATH=$path
OPS=${OPS:-adamw cross_entropy}
for op in $OPS; do python3 -m bwd_suite prebuild --op "$op" > "/tmp/prebuild_$op.log" 2>&1 & done
python3 -m bwd_suite calibrate > /tmp/calibrate.log 2>&1 &
wait; tail -qn1 /tmp/prebuild_*.log; tail -n2 /tmp/calibrate.log
timeout "$(lim 90)" python3 -m pytest -q -p no:cacheprovider tests/adamw/test_cuda_kernel.py \
  tests/cross_entropy/test_cuda_kernel.py tests/harness/test_launches.py \
  tests/harness/test_peak_memory.py -rfE > "$OUT/pytest_gpu_tests.log" 2>&1
echo "gpu tests exit $? at $((SECONDS - start)) s"; tail -n3 "$OUT/pytest_gpu_tests.log"
for op in $OPS; do
  sel=()
  if [ "$op" = adamw ] && [ -n "${CASES:-}" ]; then for c in $CASES; do sel+=(--case "$c"); done; fi
  timeout -s INT -k 20 "$(lim ${PERF_T:-220})" python3 -m bwd_suite run --op "$op" --profile perf \
    --repeats 3 --quiet "${sel[@]}" --output "$OUT/perf_$op.parquet" > "$OUT/run_perf_$op.log" 2>&1
  echo "perf $op exit $? at $((SECONDS - start)) s"; grep -v "^frame\|^'" "$OUT/run_perf_$op.log" | tail -n16 | cut -c1-240
done
timeout "$(lim 100)" python3 -m pytest -n 8 -q -p no:cacheprovider cases --suite-op cross_entropy \
  -rfEX > "$OUT/pytest_cross_entropy.log" 2>&1
echo "pytest cross_entropy exit $? at $((SECONDS - start)) s"
grep -E "^(FAILED|XPASS|ERROR)" "$OUT/pytest_cross_entropy.log" | cut -c1-200 | head -n20
tail -n1 "$OUT/pytest_cross_entropy.log"
