#!/usr/bin/env bash
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_COMMIT=$(cat .commit)
W=/tmp/w; mkdir -p $W; start=$SECONDS; el() { echo "$((SECONDS-start))s"; }
export PYTHONPATH=. BWD_SUITE_CACHE=/tmp/cache
mkdir -p /tmp/var && cp -r kernels suite ops cases golden tests conftest.py pyproject.toml benchmarks /tmp/var/
(cd /tmp/var && git init -q . && git apply benchmarks/variants/layer_norm_cols16.patch && TORCH_EXTENSIONS_DIR=/tmp/ext_var BWD_SUITE_CACHE=/tmp/cache_var python3 -c "from kernels.layer_norm import cuda; cuda.extension()" > $W/build_var.log 2>&1; echo "var build $? $(el)") &
for i in 1 2; do
  LOGS=$W/run$i REPEATS=3 VARIANT_TIMEOUT=200 bash scripts/gpu_variants.sh layer_norm=benchmarks/variants/layer_norm_cols16.toml 2>&1 | grep -E "^cuda|^layer_norm|exit" | cut -c1-110; echo "variants $i $(el)"
done
wait
cd /tmp/var && export TORCH_EXTENSIONS_DIR=/tmp/ext_var BWD_SUITE_CACHE=/tmp/cache_var
timeout 120 python3 -m pytest -n 8 -q -p no:cacheprovider cases tests/test_layer_norm*.py --suite-op layer_norm --suite-impl cuda > $W/pytest_cols16.log 2>&1; echo "pytest cols16 $? $(el)"; tail -n 1 $W/pytest_cols16.log | cut -c1-250
tar czf $OUT/r.tgz -C $W --exclude cache .; echo "total $(el)"
