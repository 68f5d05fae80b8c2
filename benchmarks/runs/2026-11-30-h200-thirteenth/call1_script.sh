#!/usr/bin/env bash
# thirteenth session, call 1: (a) per-block timestamps of the LayerNorm backward's kernels
# (call1_ts.py); (b) ln_bwd_cols released by ready flags (layer_norm_ready_flags.toml)
# beside the shipped kernel, Liger and the twin at the six perf cases, then the gpu profile
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_COMMIT=$(cat .commit)
W=/tmp/w13_1; rm -rf $W; mkdir -p $W; start=$SECONDS
pack() { tar czf $OUT/r.tgz -C $W --exclude cache --exclude ts_main .; }
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/liger_kernel-*.whl > $W/liger.log 2>&1
export PYTHONPATH=.:/tmp/site BWD_SUITE_CACHE=$W/cache
timeout 150 python3 call1_ts.py $W/ts > $W/ts.log 2>&1; echo "ts $? $((SECONDS-start))s"; cat $W/ts.log; pack
LOGS=$W/perf REPEATS=3 PEERS=liger TWIN=1 VARIANT_TIMEOUT=240 bash scripts/gpu_variants.sh \
  layer_norm=benchmarks/variants/layer_norm_ready_flags.toml 2>&1 | grep -E "^variants|^cuda|^liger|rror|^layer_norm" | cut -c1-170
echo "perf $((SECONDS-start))s"; pack
LOGS=$W/gpu REPEATS=2 PROFILE=gpu VARIANT_TIMEOUT=150 bash scripts/gpu_variants.sh \
  layer_norm=benchmarks/variants/layer_norm_ready_flags.toml 2>&1 | grep -E "^variants|fail|rror|^layer_norm" | cut -c1-200 | tail -30
echo "gpu $((SECONDS-start))s"; pack
