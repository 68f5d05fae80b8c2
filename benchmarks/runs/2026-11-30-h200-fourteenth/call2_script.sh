#!/usr/bin/env bash
# fourteenth session, call 2 (commit in .commit: conv1d_bwd_reduce as a programmatic
# dependent launch; LayerNorm's launch through the shared helper): (a) the gpu profile of
# both ops as pytest items (cuda), with their tests; (b) conv1d_cf_span_len.toml beside the
# shipped kernel, Dao (default, det) and the twin at the channel-first perf cases
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_COMMIT=$(cat .commit)
W=/tmp/w14_2; rm -rf $W; mkdir -p $W; start=$SECONDS
pack() { tar czf $OUT/r.tgz -C $W --exclude cache .; }
bash scripts/dao_site.sh unpack .dao /tmp/dao > $W/dao_unpack.log 2>&1; echo "dao unpack $?"
export BWD_SUITE_CACHE=$W/cache PYTHONPATH=.
python3 -m suite prebuild --impl cuda --op causal_conv1d > $W/prebuild.log 2>&1; echo "prebuild conv1d $? $((SECONDS-start))s"
python3 -m suite prebuild --impl cuda --op layer_norm >> $W/prebuild.log 2>&1; echo "prebuild ln $? $((SECONDS-start))s"
declare -A T=([causal_conv1d]="tests/test_cuda_kernel.py tests/test_cuda_fault.py" [layer_norm]="$(ls tests/test_layer_norm*.py)")
for op in causal_conv1d layer_norm; do
  timeout 170 python3 -m pytest -n 6 -q -p no:cacheprovider cases ${T[$op]} \
    --suite-op $op --suite-impl cuda > $W/pytest_$op.log 2>&1
  echo "pytest $op exit $? $((SECONDS-start))s"; tail -4 $W/pytest_$op.log | cut -c1-300
done; pack
export PYTHONPATH=.:/tmp/dao
C=benchmarks/variants/conv1d_cf_span_len.toml
LOGS=$W/cv REPEATS=3 PEERS=dao,dao_det TWIN=1 VARIANT_TIMEOUT=200 bash scripts/gpu_variants.sh "causal_conv1d=$C@-cf-" 2>&1 \
  | grep -E "^variants|rror|^causal_conv1d" | cut -c1-170
echo "cv perf $((SECONDS-start))s"; pack
