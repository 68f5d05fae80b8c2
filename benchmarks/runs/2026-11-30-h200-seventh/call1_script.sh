#!/usr/bin/env bash
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_COMMIT=$(cat .commit)
W=/tmp/w; mkdir -p $W; start=$SECONDS; el() { echo "$((SECONDS-start))s"; }
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/liger_kernel-*.whl > $W/liger.log 2>&1
export PYTHONPATH=.:/tmp/site BWD_SUITE_CACHE=/tmp/cache
python3 -m suite prebuild --impl cuda > $W/prebuild.log 2>&1 &
LOGS=$W REPEATS=3 PEERS=liger VARIANT_TIMEOUT=280 bash scripts/gpu_variants.sh layer_norm=benchmarks/variants/layer_norm_issue.toml; echo "variants $(el)"
wait; echo "prebuilt $(el)"
timeout 150 python3 -m pytest -n 8 -q -p no:cacheprovider cases tests/test_softmax*.py --suite-op softmax > $W/pytest_softmax.log 2>&1; echo "pytest softmax $? $(el)"; tail -n 1 $W/pytest_softmax.log | cut -c1-250
tar czf $OUT/r.tgz -C $W --exclude cache .; echo "total $(el)"
