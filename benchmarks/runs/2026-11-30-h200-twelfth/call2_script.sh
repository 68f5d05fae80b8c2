#!/usr/bin/env bash
# twelfth session, call 2: softmax with the fp32 split rows landed (and the bf16 split
# kernel now the same template): compute-sanitizer memcheck/racecheck on the split-rows
# cases, then scripts/gpu_ops.sh for softmax (build, gpu profile + tests as pytest, the perf
# profile with 20 repeats), then the layer_norm perf profile
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_COMMIT=$(cat .commit)
W=/tmp/w2; mkdir -p $W; start=$SECONDS
pack() { tar czf $OUT/r.tgz -C $W --exclude cache .; }
export BWD_SUITE_CACHE=$W/cache
OUT=$W OPS="softmax" PYTEST_TIMEOUT=150 RUN_TIMEOUT=150 bash scripts/gpu_ops.sh 2>&1 | tee $W/gpu_ops.log | grep -E "exit|passed|failed|frac|cuda |liger |torch" | cut -c1-200
echo "gpu_ops $((SECONDS-start))s"; pack
export PYTHONPATH=.:/tmp/site
for tool in memcheck racecheck; do
  timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 python3 -m suite run --profile gpu --op softmax \
    --case split-rows --impl cuda --no-timing --repeats 1 --quiet --out /tmp/san_$tool > $W/sanitize_split_$tool.log 2>&1
  echo "sanitizer $tool exit $? $(grep -h 'ERROR SUMMARY' $W/sanitize_split_$tool.log)"
done
echo "san $((SECONDS-start))s"; pack
timeout 170 python3 -m suite run --profile perf --op layer_norm --quiet --repeats 20 --output $W/perf_layer_norm.parquet > $W/run_perf_layer_norm.log 2>&1
echo "perf layer_norm exit $? $((SECONDS-start))s"; tail -12 $W/run_perf_layer_norm.log | cut -c1-250; pack
