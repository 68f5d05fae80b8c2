#!/usr/bin/env bash
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_COMMIT=$(cat .commit)
W=/tmp/w; mkdir -p $W; start=$SECONDS; el() { echo "$((SECONDS-start))s"; }
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/liger_kernel-*.whl > $W/liger.log 2>&1
export PYTHONPATH=.:/tmp/site BWD_SUITE_CACHE=/tmp/cache
mkdir -p /tmp/var && cp -r kernels suite ops cases golden tests conftest.py pyproject.toml benchmarks /tmp/var/
(cd /tmp/var && git init -q . && git apply benchmarks/variants/layer_norm_fold.patch && TORCH_EXTENSIONS_DIR=/tmp/ext_var BWD_SUITE_CACHE=/tmp/cache_var python3 -c "from kernels.layer_norm import cuda; cuda.extension()" > $W/build_var.log 2>&1; echo "var build $? $(el)") &
LOGS=$W REPEATS=3 PEERS=liger,torch_ref VARIANT_TIMEOUT=280 bash scripts/gpu_variants.sh layer_norm=benchmarks/variants/layer_norm_fold.toml; echo "variants $(el)"
wait
tar czf $OUT/r.tgz -C $W --exclude cache .
cd /tmp/var && export TORCH_EXTENSIONS_DIR=/tmp/ext_var BWD_SUITE_CACHE=/tmp/cache_var
timeout 150 python3 -m pytest -n 8 -q -p no:cacheprovider cases tests/test_layer_norm*.py --suite-op layer_norm --suite-impl cuda > $W/pytest_fold.log 2>&1; echo "pytest fold $? $(el)"; tail -n 1 $W/pytest_fold.log | cut -c1-250
for tool in memcheck racecheck synccheck; do
  (timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 python3 -m suite run --profile smoke --op layer_norm --impl cuda --no-timing --repeats 1 --quiet --out /tmp/san_$tool > $W/sanitize_fold_$tool.log 2>&1; echo "sanitizer $tool exit $? $(grep -h 'ERROR SUMMARY' $W/sanitize_fold_$tool.log)") &
done; wait; echo "sanitized $(el)"
tar czf $OUT/r.tgz -C $W --exclude cache .; echo "total $(el)"
