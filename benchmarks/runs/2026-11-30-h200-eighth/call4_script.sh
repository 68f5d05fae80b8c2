#!/usr/bin/env bash
# eighth session, call 4: softmax L2 bulk prefetch variant, target cases, beside cuda and Liger
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_COMMIT=$(cat .commit)
W=/tmp/w; mkdir -p $W; start=$SECONDS
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/liger_kernel-*.whl > $W/liger.log 2>&1
export PYTHONPATH=.:/tmp/site
BWD_SUITE_CACHE=$W/cache LOGS=$W REPEATS=3 PEERS=liger VARIANT_TIMEOUT=240 bash scripts/gpu_variants.sh softmax=benchmarks/variants/softmax_l2pf.toml@targets
echo "total $((SECONDS-start))s"; tar czf $OUT/r.tgz -C $W --exclude cache .
