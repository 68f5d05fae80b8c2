#!/usr/bin/env bash
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_COMMIT=$(cat .commit)
W=/tmp/w; mkdir -p $W; start=$SECONDS; el() { echo "$((SECONDS-start))s"; }
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/liger_kernel-*.whl > $W/liger.log 2>&1
export PYTHONPATH=.:/tmp/site BWD_SUITE_CACHE=/tmp/cache
mkdir -p /tmp/var && cp -r kernels suite ops cases golden tests conftest.py pyproject.toml benchmarks /tmp/var/
(cd /tmp/var && git init -q . && git apply benchmarks/variants/softmax_c4only.patch && BWD_SUITE_CACHE=/tmp/cache_var python3 -c "from kernels.softmax import cuda; cuda.extension()" > $W/build_var.log 2>&1; echo "var build $? $(el)") &
python3 -m suite calibrate
timeout 150 python3 scripts/kernel_variants.py --op softmax --variants benchmarks/variants/softmax_fp32_blocks.toml --case R4096-N8192 --with liger,torch_ref --repeats 3 --output $W/variants_c4only.parquet > $W/variants_c4only.log 2>&1; echo "variants $? $(el)"; grep -v "^building" $W/variants_c4only.log | tail -9
wait; tar czf $OUT/r.tgz -C $W --exclude cache .
(cd /tmp/var && BWD_SUITE_CACHE=/tmp/cache_var timeout 80 python3 -m pytest -n 8 -q -p no:cacheprovider cases tests/test_softmax_op.py --suite-op softmax --suite-impl cuda > $W/pytest_c4only_softmax.log 2>&1; echo "pytest c4only softmax $? $(el)"; tail -n 1 $W/pytest_c4only_softmax.log | cut -c1-250)
tar czf $OUT/r.tgz -C $W --exclude cache .; echo "total $(el)"
