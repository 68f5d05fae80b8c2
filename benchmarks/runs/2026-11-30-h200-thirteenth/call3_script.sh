#!/usr/bin/env bash
# thirteenth session, call 3: (a) finer per-block timestamps of the LayerNorm tail, shipped
# and ws_v4 (call3_ts.py); (b) Dao's adapter into the suite's outputs (kernels/causal_conv1d/
# dao.py, uncommitted) against the old one (call3_dao_old.py) in one perf run, then the gpu
# profile for both; (c) conv1d_bytes_before.toml on the channel-first cases, perf and gpu
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_COMMIT=$(cat .commit)
W=/tmp/w13_3; rm -rf $W; mkdir -p $W; start=$SECONDS
pack() { tar czf $OUT/r.tgz -C $W --exclude cache --exclude ts_main .; }
export BWD_SUITE_CACHE=$W/cache
( python3 -m suite prebuild --impl cuda --op causal_conv1d > $W/prebuild.log 2>&1; echo "prebuild $? $((SECONDS-start))s" ) &
for v in shipped ws_v4; do
  arg=""; [ $v != shipped ] && arg="--variant=benchmarks/variants/layer_norm_ws_v4.toml:$v"
  timeout 150 python3 call3_ts.py $W/ts $arg > $W/ts_$v.log 2>&1; echo "ts $v $? $((SECONDS-start))s"; grep -v "^nvcc 0" $W/ts_$v.log
done; pack; wait
bash scripts/dao_site.sh unpack .dao /tmp/dao > $W/dao_unpack.log 2>&1; echo "dao unpack $?"
export PYTHONPATH=.:/tmp/dao
python3 -c "import causal_conv1d; print('dao', causal_conv1d.__version__)"
I=cuda,dao,dao_det,call3_dao_old:dao_copy,call3_dao_old:dao_det_copy
timeout 240 python3 -m suite run --profile perf --op causal_conv1d --impl $I --repeats 3 --quiet --output $W/dao_perf.parquet > $W/dao_perf.log 2>&1
echo "dao perf $? $((SECONDS-start))s"; tail -8 $W/dao_perf.log | cut -c1-160; pack
timeout 200 python3 -m suite run --profile gpu --op causal_conv1d --impl dao,dao_det,call3_dao_old:dao_copy,call3_dao_old:dao_det_copy --no-timing --quiet --output $W/dao_gpu.parquet > $W/dao_gpu.log 2>&1
echo "dao gpu $? $((SECONDS-start))s"; tail -6 $W/dao_gpu.log | cut -c1-160; pack
export PYTHONPATH=.
T=benchmarks/variants/conv1d_bytes_before.toml
LOGS=$W/cf_perf REPEATS=3 TWIN=1 VARIANT_TIMEOUT=200 bash scripts/gpu_variants.sh "causal_conv1d=$T@-cf-" 2>&1 | grep -E "^variants|rror|^causal_conv1d" | cut -c1-160
echo "cf perf $((SECONDS-start))s"; pack
LOGS=$W/cf_gpu REPEATS=2 PROFILE=gpu VARIANT_TIMEOUT=200 bash scripts/gpu_variants.sh "causal_conv1d=$T@-cf-" 2>&1 | grep -E "^variants|rror|^causal_conv1d" | cut -c1-160
echo "cf gpu $((SECONDS-start))s"; pack
