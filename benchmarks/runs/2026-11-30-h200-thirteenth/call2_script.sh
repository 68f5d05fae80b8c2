#!/usr/bin/env bash
# thirteenth session, call 2: the workspace tail. Per-block timestamps (call2_ts.py) of the
# shipped kernel, fold2 and ws_direct (layer_norm_ws_volume.toml); those variants beside
# the shipped kernel, Liger and the twin at the six perf cases (two runs); the gpu profile
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_COMMIT=$(cat .commit)
W=/tmp/w13_2; rm -rf $W; mkdir -p $W; start=$SECONDS
pack() { tar czf $OUT/r.tgz -C $W --exclude cache --exclude ts_main .; }
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/liger_kernel-*.whl > $W/liger.log 2>&1
export PYTHONPATH=.:/tmp/site BWD_SUITE_CACHE=$W/cache
T=benchmarks/variants/layer_norm_ws_volume.toml
for v in shipped fold2 ws_direct; do
  arg=""; [ $v != shipped ] && arg="--variant=$T:$v"
  timeout 150 python3 call2_ts.py $W/ts $arg > $W/ts_$v.log 2>&1; echo "ts $v $? $((SECONDS-start))s"; grep -v "^nvcc 0" $W/ts_$v.log
done; pack
for run in a b; do
  LOGS=$W/perf_$run REPEATS=3 PEERS=liger TWIN=1 VARIANT_TIMEOUT=240 bash scripts/gpu_variants.sh layer_norm=$T 2>&1 \
    | grep -E "^variants|^cuda|^liger|rror|^layer_norm" | grep -v "16384x4096/M16384-N4096-fp32\|8192x1024" | cut -c1-150
  echo "perf $run $((SECONDS-start))s"; pack
  if [ $run = a ]; then
    LOGS=$W/gpu REPEATS=2 PROFILE=gpu VARIANT_TIMEOUT=150 bash scripts/gpu_variants.sh layer_norm=$T 2>&1 \
      | grep -E "^variants|fail|rror|^layer_norm" | cut -c1-200 | tail -12
    echo "gpu $((SECONDS-start))s"; pack
  fi
done
