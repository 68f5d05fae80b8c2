#!/usr/bin/env bash
# twelfth session, call 3: LayerNorm rows by bulk (TMA) copies
# (benchmarks/variants/layer_norm_bulk.toml: bulk, bulk16) beside the shipped kernel, Liger
# and the twin at the six perf cases; then the gpu profile through `bulk` alone
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_COMMIT=$(cat .commit)
W=/tmp/w3; mkdir -p $W; start=$SECONDS
pack() { tar czf $OUT/r.tgz -C $W --exclude cache .; }
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/liger_kernel-*.whl > $W/liger.log 2>&1
export PYTHONPATH=.:/tmp/site BWD_SUITE_CACHE=$W/cache
LOGS=$W/perf REPEATS=3 PEERS=liger TWIN=1 VARIANT_TIMEOUT=280 bash scripts/gpu_variants.sh \
  layer_norm=benchmarks/variants/layer_norm_bulk.toml 2>&1 | grep -E "^variants|^cuda|^liger|rror|^layer_norm" | cut -c1-170
echo "perf $((SECONDS-start))s"; pack
mkdir -p /tmp/v1 && cp benchmarks/variants/layer_norm_bulk.patch /tmp/v1/ && python3 - <<'PY'
import re
t = open("benchmarks/variants/layer_norm_bulk.toml").read()
open("/tmp/v1/layer_norm_bulk_only.toml", "w").write(t[:t.index('[[variant]]\nname = "bulk16"')])
PY
LOGS=$W/gpu REPEATS=2 PROFILE=gpu VARIANT_TIMEOUT=230 bash scripts/gpu_variants.sh \
  layer_norm=/tmp/v1/layer_norm_bulk_only.toml 2>&1 | grep -E "^variants|fail|rror|^layer_norm" | cut -c1-200 | tail -30
echo "gpu $((SECONDS-start))s"; pack
