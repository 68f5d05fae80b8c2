#!/usr/bin/env bash
# One device call after the CUDA layout change (one .cu per job, plan/launch split) of
# softmax, adamw and cross entropy: build them, run their GPU tests and the gpu profile
# (no timing), fuzz cross_entropy/cuda for the time left, and print the attention probe.
#   device run: [DEADLINE=540] bash scripts/gpu_layout.sh
# Out: $OUT/layout.log, $OUT/fuzz_blocks.toml, $OUT/layout.tgz
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_CACHE=/tmp/cache
start=$SECONDS; deadline=${DEADLINE:-540}
work=/tmp/layout; mkdir -p "$work"
main() {
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
pids=()
for op in softmax adamw cross_entropy; do
  python3 -m bwd_suite prebuild --op "$op" > "$work/prebuild_$op.log" 2>&1 &
  pids+=($!)
done
timeout 200 python3 scripts/attention_probe.py > "$work/probe.txt" 2>&1 &
probe=$!
wait "${pids[@]}"
tail -n 2 "$work"/prebuild_*.log
echo "built after $(( SECONDS - start )) s"
python3 -m pytest -q -p no:cacheprovider tests/adamw/test_cuda_kernel.py \
  tests/cross_entropy/test_cuda_kernel.py tests/cross_entropy/test_in_place.py tests/cuda \
  tests/softmax > "$work/pytest.txt" 2>&1
echo "GPU tests: exit $? after $(( SECONDS - start )) s"; tail -n 4 "$work/pytest.txt"
wait $probe; echo "--- attention probe"; cat "$work/probe.txt" | cut -c1-400 | tail -n 40
for op in softmax adamw cross_entropy; do
  timeout 200 python3 -m bwd_suite run --profile gpu --op "$op" --impl cuda --no-timing --quiet \
    --output "$work/gpu_$op.parquet" > "$work/gpu_$op.txt" 2>&1
  echo "$op gpu profile (cuda): exit $? after $(( SECONDS - start )) s"
  grep -E "^$op|FAIL|ERROR" "$work/gpu_$op.txt" | cut -c1-300 | head -n 6
done
T=$(( deadline - (SECONDS - start) - 20 ))
if [ "$T" -gt 60 ]; then
  echo "fuzzing cross_entropy/cuda for $T s"
  python3 -m bwd_suite fuzz --op cross_entropy --impl cuda --size gpu --time "$T" --seed 11 --quiet \
    --output "$work/fuzz_ce.parquet" > "$work/fuzz_ce.toml" 2> "$work/fuzz_ce.log"
  echo "fuzz: exit $? after $(( SECONDS - start )) s"; tail -n 6 "$work/fuzz_ce.log" | cut -c1-400
  cp "$work/fuzz_ce.toml" "$OUT/fuzz_blocks.toml"
fi
}
main > "$OUT/layout.log" 2>&1
tar czf "$OUT/layout.tgz" -C "$work" . 2>/dev/null
cat "$OUT/layout.log"
