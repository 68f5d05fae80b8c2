#!/usr/bin/env bash
# One device call for the harness's trust checks on a GPU: build adamw's and cross
# entropy's kernels; run the cross-entropy z-loss finding (cases/cross_entropy/
# findings.toml) and the cross-entropy GPU tests; check that GPT-2 large's fp32 AdamW case
# is unsupported with its memory estimate where the card cannot hold it (never an
# out-of-memory failure); then fuzz adamw/cuda and cross_entropy/cuda side by side for the
# time left, shrinking included (fuzz --time bounds the whole command).
#   device run: [SEED=7] [DEADLINE=570] [CHECKS=0] [GPT2=0] [PROFILE=1] bash scripts/gpu_trust.sh
#   (PROFILE=1 also runs cross entropy's gpu profile for cuda, without timing)
# Out: $OUT/trust.log (everything printed), $OUT/fuzz_blocks.toml (shrunk failures as
# [[case]] blocks), $OUT/trust.tgz (results parquet files and logs).
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_CACHE=/tmp/cache
start=$SECONDS; deadline=${DEADLINE:-570}
work=/tmp/trust; mkdir -p "$work"
main() {
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv,noheader
pids=()
for op in adamw cross_entropy; do
  python3 -m bwd_suite prebuild --op "$op" > "$work/prebuild_$op.log" 2>&1 &
  pids+=($!)
done
wait "${pids[@]}"
tail -n 2 "$work"/prebuild_*.log
if [ "${CHECKS:-1}" = 1 ]; then
  python3 -m bwd_suite run --profile gpu --cases cases/cross_entropy/findings.toml \
    --impl cuda,torch_ref --no-timing --quiet --output "$work/findings.parquet" \
    > "$work/findings.txt" 2>&1
  echo "cross-entropy findings: exit $? after $(( SECONDS - start )) s"
  head -c 2500 "$work/findings.txt"
  python3 -m pytest -q -p no:cacheprovider -x tests/cross_entropy/test_cuda_kernel.py \
    tests/cross_entropy/test_in_place.py > "$work/pytest_ce.txt" 2>&1
  echo "cross-entropy GPU tests: exit $? after $(( SECONDS - start )) s"
  tail -n 3 "$work/pytest_ce.txt"
  [ "${GPT2:-1}" = 1 ] && timeout 240 python3 -m bwd_suite run --profile perf --op adamw --case gpt2_large-fp32-plain \
    --impl cuda --no-timing --output "$work/gpt2.parquet" > "$work/gpt2.txt" 2>&1
  echo "GPT-2 large fp32: exit $? after $(( SECONDS - start )) s"
  grep -E "^adamw|not enough|OutOfMemory" "$work/gpt2.txt" | cut -c1-400 | head -n 6
  if [ "${PROFILE:-0}" = 1 ]; then
    timeout 240 python3 -m bwd_suite run --profile gpu --op cross_entropy --impl cuda --no-timing \
      --quiet --output "$work/ce_gpu.parquet" > "$work/ce_gpu.txt" 2>&1
    echo "cross-entropy gpu profile (cuda): exit $? after $(( SECONDS - start )) s"
    grep -E "^cross_entropy|FAIL|ERROR" "$work/ce_gpu.txt" | cut -c1-300 | head -n 8
  fi
fi
T=$(( deadline - (SECONDS - start) - 30 ))
echo "fuzzing for $T s each"
pids=()
for pair in adamw:cuda cross_entropy:cuda; do
  IFS=: read -r op impl <<< "$pair"
  name="${op}_${impl}_s${SEED:-7}"
  ( python3 -m bwd_suite fuzz --op "$op" --impl "$impl" --size gpu --time "$T" \
      --seed "${SEED:-7}" --quiet --output "$work/fuzz_$name.parquet" \
      > "$work/fuzz_$name.toml" 2> "$work/fuzz_$name.log"
    echo "fuzz $op $impl: exit $? after $(( SECONDS - start )) s" >> "$work/fuzz_$name.log" ) &
  pids+=($!)
done
wait "${pids[@]}"
for f in "$work"/fuzz_*.log; do tail -n 6 "$f" | cut -c1-400; done
cat "$work"/fuzz_*.toml > "$OUT/fuzz_blocks.toml"
head -c 6000 "$OUT/fuzz_blocks.toml"
tar czf "$OUT/trust.tgz" -C "$work" .
}
# a function piped to tee, not `exec > >(tee)`: bash 5.1's bare `wait` also waits for a
# process substitution, which never ends while this shell holds its input
main 2>&1 | tee "$OUT/trust.log"
