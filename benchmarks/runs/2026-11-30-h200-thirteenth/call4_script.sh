#!/usr/bin/env bash
# thirteenth session, call 4: (a) LayerNorm ws_v4 / ws_shfl (layer_norm_ws_v4.toml) beside
# the shipped kernel, Liger and the twin at the six perf cases, twice, and the gpu profile;
# (b) conv1d perf with Dao through the new adapter (commit in .commit): cuda, dao, dao_det
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_COMMIT=$(cat .commit)
W=/tmp/w13_4; rm -rf $W; mkdir -p $W; start=$SECONDS
pack() { tar czf $OUT/r.tgz -C $W --exclude cache .; }
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/liger_kernel-*.whl > $W/liger.log 2>&1
bash scripts/dao_site.sh unpack .dao /tmp/dao > $W/dao_unpack.log 2>&1; echo "dao unpack $?"
export BWD_SUITE_CACHE=$W/cache PYTHONPATH=.:/tmp/site
( python3 -m suite prebuild --impl cuda > $W/prebuild.log 2>&1; echo "prebuild $? $((SECONDS-start))s" ) &
T=benchmarks/variants/layer_norm_ws_v4.toml
for run in a b; do
  LOGS=$W/ln_$run REPEATS=3 PEERS=liger TWIN=1 VARIANT_TIMEOUT=240 bash scripts/gpu_variants.sh layer_norm=$T 2>&1 \
    | grep -E "^variants|^cuda|^liger|rror|^layer_norm" | grep -v "16384x4096/M16384-N4096-fp32\|8192x1024" | cut -c1-150
  echo "ln $run $((SECONDS-start))s"; pack
  if [ $run = a ]; then
    LOGS=$W/ln_gpu REPEATS=2 PROFILE=gpu VARIANT_TIMEOUT=150 bash scripts/gpu_variants.sh layer_norm=$T 2>&1 \
      | grep -E "^variants|fail|rror|^layer_norm" | cut -c1-200 | tail -12
    echo "ln gpu $((SECONDS-start))s"; pack
  fi
done
wait
export PYTHONPATH=.:/tmp/dao
timeout 200 python3 -m suite run --profile perf --op causal_conv1d --impl cuda,dao,dao_det --repeats 3 --quiet --output $W/conv1d_perf.parquet > $W/conv1d_perf.log 2>&1
echo "conv1d perf $? $((SECONDS-start))s"; grep -E "^causal_conv1d|^op " $W/conv1d_perf.log | cut -c1-160; pack
