#!/usr/bin/env bash
# fourteenth session, call 5: conv1d_cf_pair_issue.toml (the channel-first ring's copies
# issued two adjacent tiles at a time) beside the shipped kernel, Dao (default, det) and the
# twin at the channel-first perf cases; then the gpu profile's channel-first cases
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_COMMIT=$(cat .commit)
W=/tmp/w14_5; rm -rf $W; mkdir -p $W; start=$SECONDS
pack() { tar czf $OUT/r.tgz -C $W --exclude cache .; }
bash scripts/dao_site.sh unpack .dao /tmp/dao > $W/dao_unpack.log 2>&1; echo "dao unpack $?"
export BWD_SUITE_CACHE=$W/cache PYTHONPATH=.:/tmp/dao
C=benchmarks/variants/conv1d_cf_pair_issue.toml
LOGS=$W/cv REPEATS=3 PEERS=dao,dao_det TWIN=1 VARIANT_TIMEOUT=200 bash scripts/gpu_variants.sh "causal_conv1d=$C@-cf-" 2>&1 \
  | grep -E "^variants|rror|^causal_conv1d" | cut -c1-170
echo "cv perf $((SECONDS-start))s"; pack
LOGS=$W/gpu REPEATS=2 PROFILE=gpu VARIANT_TIMEOUT=150 bash scripts/gpu_variants.sh "causal_conv1d=$C@-cf-" 2>&1 \
  | grep -E "^variants|fail|rror|^causal" | cut -c1-200 | tail -6
echo "gpu $((SECONDS-start))s"; pack
