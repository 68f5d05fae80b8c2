#!/usr/bin/env bash
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_COMMIT=$(cat .commit)
W=/tmp/w; mkdir -p $W; start=$SECONDS; el() { echo "$((SECONDS-start))s"; }
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/liger_kernel-*.whl > $W/liger.log 2>&1
export PYTHONPATH=.:/tmp/site BWD_SUITE_CACHE=/tmp/cache
# the lean variant as the tree, for the whole gpu profile (built alongside the variants)
mkdir -p /tmp/var && cp -r kernels suite ops cases golden tests conftest.py pyproject.toml benchmarks /tmp/var/
(cd /tmp/var && git init -q . && git apply benchmarks/variants/softmax_lean.patch && echo "lean applied" &&
 BWD_SUITE_CACHE=/tmp/cache_var python3 -c "from kernels.softmax import cuda; cuda.extension()" > $W/build_var.log 2>&1; echo "var build $? $(el)") &
LOGS=$W REPEATS=3 PEERS=liger,torch_ref VARIANT_TIMEOUT=330 bash scripts/gpu_variants.sh softmax=benchmarks/variants/softmax_reduce.toml; echo "variants $(el)"
wait
(cd /tmp/var && BWD_SUITE_CACHE=/tmp/cache_var timeout 150 python3 -m pytest -n 6 -q -p no:cacheprovider cases tests/test_softmax_op.py --suite-op softmax --suite-impl cuda > $W/pytest_var_softmax.log 2>&1; echo "pytest var softmax $? $(el)"; tail -n 2 $W/pytest_var_softmax.log | cut -c1-250)
tar czf $OUT/r.tgz -C $W --exclude cache .; echo "total $(el)"
