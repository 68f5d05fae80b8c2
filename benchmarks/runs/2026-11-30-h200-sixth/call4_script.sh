#!/usr/bin/env bash
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_COMMIT=$(cat .commit)
W=/tmp/w; mkdir -p $W; start=$SECONDS; el() { echo "$((SECONDS-start))s"; }
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/liger_kernel-*.whl > $W/liger.log 2>&1
export PYTHONPATH=.:/tmp/site BWD_SUITE_CACHE=/tmp/cache
mkdir -p /tmp/var && cp -r kernels suite ops cases golden tests conftest.py pyproject.toml benchmarks /tmp/var/
(cd /tmp/var && python3 - <<'PY'
p='kernels/softmax/csrc/softmax_bwd.cu'; s=open(p).read()
old="!kWarp && kVec && C <= 2 && sizeof(T) == 2 ? kBlocksC2Half : 1)"; assert s.count(old)==1
open(p,'w').write(s.replace(old,"!kWarp && kVec && C <= 2 ? (sizeof(T) == 2 ? kBlocksC2Half : 2) : 1)"))
PY
 BWD_SUITE_CACHE=/tmp/cache_var python3 -c "from kernels.softmax import cuda; cuda.extension()" > $W/build_var.log 2>&1; echo "var build $? $(el)") &
LOGS=$W REPEATS=3 PEERS=liger,torch_ref VARIANT_TIMEOUT=300 bash scripts/gpu_variants.sh softmax=benchmarks/variants/softmax_fp32_blocks.toml; echo "variants $(el)"
wait
(cd /tmp/var && BWD_SUITE_CACHE=/tmp/cache_var timeout 120 python3 -m pytest -n 6 -q -p no:cacheprovider cases tests/test_softmax_op.py --suite-op softmax --suite-impl cuda > $W/pytest_var_softmax.log 2>&1; echo "pytest lb2 softmax $? $(el)"; tail -n 2 $W/pytest_var_softmax.log | cut -c1-250)
tar czf $OUT/r.tgz -C $W --exclude cache .; echo "total $(el)"
