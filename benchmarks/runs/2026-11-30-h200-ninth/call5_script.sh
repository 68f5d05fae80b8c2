#!/usr/bin/env bash
# ninth session, call 5: warp partials by loads (partials_loads.toml) on the LayerNorm perf
# profile and the softmax target cases beside Liger; then LayerNorm's gpu profile with it
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_COMMIT=$(cat .commit)
W=/tmp/w; mkdir -p $W; start=$SECONDS
pack() { tar czf $OUT/r.tgz -C $W --exclude cache .; }
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/liger_kernel-*.whl > $W/liger.log 2>&1
export PYTHONPATH=.:/tmp/site BWD_SUITE_CACHE=$W/cache
LOGS=$W/a REPEATS=3 VARIANT_TIMEOUT=150 bash scripts/gpu_variants.sh layer_norm=benchmarks/variants/partials_loads.toml
echo "ln $((SECONDS-start))s"; pack
LOGS=$W/a REPEATS=3 PEERS=liger VARIANT_TIMEOUT=120 bash scripts/gpu_variants.sh softmax=benchmarks/variants/partials_loads_softmax.toml@targets 2>&1 | grep -v "^cuda\|^liger"
echo "sm $((SECONDS-start))s"; pack
LOGS=$W/gpu PROFILE=gpu REPEATS=2 VARIANT_TIMEOUT=100 bash scripts/gpu_variants.sh layer_norm=benchmarks/variants/partials_loads.toml 2>&1 | grep -E "exit|items|^layer_norm|FAIL" | head
echo "total $((SECONDS-start))s"; pack
