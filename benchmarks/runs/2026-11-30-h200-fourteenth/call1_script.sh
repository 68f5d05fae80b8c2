#!/usr/bin/env bash
# fourteenth session, call 1: (a) softmax_l2_policy.toml (y, dy with an L2 evict-first
# policy) beside the shipped kernel, Liger and the twin at the 16 perf cases; (b)
# conv1d_reduce_pdl.toml beside the shipped kernel, Dao (default, det) and the twin at the
# channel-first perf cases
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_COMMIT=$(cat .commit)
W=/tmp/w14_1; rm -rf $W; mkdir -p $W; start=$SECONDS
pack() { tar czf $OUT/r.tgz -C $W --exclude cache .; }
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/liger_kernel-*.whl > $W/liger.log 2>&1
bash scripts/dao_site.sh unpack .dao /tmp/dao > $W/dao_unpack.log 2>&1; echo "dao unpack $?"
export BWD_SUITE_CACHE=$W/cache PYTHONPATH=.:/tmp/site:/tmp/dao
S=benchmarks/variants/softmax_l2_policy.toml
LOGS=$W/sm REPEATS=3 PEERS=liger TWIN=1 VARIANT_TIMEOUT=270 bash scripts/gpu_variants.sh softmax=$S 2>&1 \
  | grep -E "^variants|rror|^softmax" | cut -c1-170
echo "sm perf $((SECONDS-start))s"; pack
C=benchmarks/variants/conv1d_reduce_pdl.toml
LOGS=$W/cv REPEATS=3 PEERS=dao,dao_det TWIN=1 VARIANT_TIMEOUT=200 bash scripts/gpu_variants.sh "causal_conv1d=$C@-cf-" 2>&1 \
  | grep -E "^variants|rror|^causal_conv1d" | cut -c1-170
echo "cv perf $((SECONDS-start))s"; pack
