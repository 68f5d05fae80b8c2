#!/usr/bin/env bash
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_COMMIT=$(cat .commit)
W=/tmp/w; mkdir -p $W; start=$SECONDS; el() { echo "$((SECONDS-start))s"; }
export PYTHONPATH=. BWD_SUITE_CACHE=/tmp/cache
python3 -c "from kernels.layer_norm import cuda; cuda.extension(); from kernels.softmax import cuda as s; s.extension()" > $W/build.log 2>&1 &
LOGS=$W REPEATS=3 VARIANT_TIMEOUT=280 bash scripts/gpu_variants.sh layer_norm=benchmarks/variants/layer_norm_launch.toml; echo "variants $(el)"
wait; echo "built $(el)"; timeout 120 python3 s7_timeline.py 2>&1 | grep -v Warning | tee $W/timeline.log; echo "timeline $(el)"
tar czf $OUT/r.tgz -C $W --exclude cache .; echo "total $(el)"
