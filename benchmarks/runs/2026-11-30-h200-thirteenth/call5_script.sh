#!/usr/bin/env bash
# thirteenth session, call 5: LayerNorm as landed (float4 workspace rows), the suite's perf
# profile with every implementation (cuda, liger, torch_ref), twice
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_COMMIT=$(cat .commit)
W=/tmp/w13_5; rm -rf $W; mkdir -p $W; start=$SECONDS
pack() { tar czf $OUT/r.tgz -C $W --exclude cache .; }
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/liger_kernel-*.whl > $W/liger.log 2>&1
export BWD_SUITE_CACHE=$W/cache PYTHONPATH=.:/tmp/site
python3 -c "from kernels.layer_norm.cuda import extension; extension()" > $W/build.log 2>&1; echo "build $? $((SECONDS-start))s"
for run in a b; do
  timeout 120 python3 -m suite run --profile perf --op layer_norm --quiet --repeats 20 --output $W/ln_perf_$run.parquet > $W/ln_perf_$run.log 2>&1
  echo "ln $run $? $((SECONDS-start))s"; grep -E "^layer_norm|^op " $W/ln_perf_$run.log | cut -c1-160; pack
done
