#!/usr/bin/env bash
set -uo pipefail
export PYTHONPATH=. PYTHONUNBUFFERED=1 BWD_SUITE_CACHE=/tmp/cache BWD_SUITE_COMMIT=$(cat .commit)
W=/tmp/w; mkdir -p $W; start=$SECONDS; el() { echo "$((SECONDS-start))s"; }
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/liger_kernel-*.whl > $W/liger.log 2>&1
# patched tree: cf rows groups + cl seg16, for correctness over the whole gpu profile
mkdir -p /tmp/var && cp -r kernels suite ops cases golden tests conftest.py pyproject.toml /tmp/var/ 2>/dev/null
(cd /tmp/var && git init -q . 2>/dev/null; patch -p1 < $OLDPWD/benchmarks/variants/conv1d_cf_rows.patch > $W/patch.log 2>&1; echo "patch $?";
 sed -i 's/while (seg > 32 \&\& /while (seg > 16 \&\& /' kernels/causal_conv1d/csrc/conv1d_bwd.cu; grep -c "seg > 16" kernels/causal_conv1d/csrc/conv1d_bwd.cu)
python3 -m suite prebuild --impl cuda > $W/prebuild.log 2>&1 &
(cd /tmp/var && BWD_SUITE_CACHE=/tmp/cache_var python3 -m suite prebuild --impl cuda > $W/prebuild_var.log 2>&1; echo "prebuild var $?"); wait; echo "prebuilt $(el)"
python3 -m suite calibrate
(cd /tmp/var && BWD_SUITE_CACHE=/tmp/cache_var timeout 150 python3 -m pytest -n 6 -q -p no:cacheprovider cases tests/test_cuda_kernel.py --suite-impl cuda --suite-op causal_conv1d > $W/pytest_var_conv1d.log 2>&1; echo "pytest var $? $(el)"); grep -E "FAILED|passed|failed" $W/pytest_var_conv1d.log | tail -12 | cut -c1-250
LOGS=$W REPEATS=3 bash scripts/gpu_variants.sh "causal_conv1d=benchmarks/variants/conv1d_cf_rows.toml@-cf-" "causal_conv1d=benchmarks/variants/conv1d_cl_small.toml@-cl-"; echo "variants $(el)"
export PYTHONPATH=.:/tmp/site
for op in layer_norm softmax; do
  timeout 100 python3 -m pytest -n 6 -q -p no:cacheprovider cases $(ls tests/test_${op}*.py) --suite-op $op > $W/pytest_$op.log 2>&1; echo "pytest $op $? $(el)"; tail -n 1 $W/pytest_$op.log | cut -c1-200
done
tar czf $OUT/r.tgz -C $W --exclude cache .; echo "total $(el)"
