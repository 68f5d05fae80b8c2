#!/usr/bin/env bash
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_CACHE=/tmp/cache
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/liger_kernel-*.whl > /dev/null 2>&1
export PYTHONPATH=.:/tmp/site; start=$SECONDS
(python3 -c "from kernels.layer_norm import cuda; cuda.extension()" > /dev/null 2>&1 &
 python3 -c "from kernels.softmax import cuda; cuda.extension()" > /dev/null 2>&1; wait); echo "built $((SECONDS-start))s"
for spec in "layer_norm cuda M4096-N8192-bf16" "layer_norm liger M4096-N8192-bf16" "softmax cuda R4096-N8192-bf16" "softmax liger R4096-N8192-bf16" "layer_norm torch_ref M8192-N1024-bf16"; do
  set -- $spec; timeout 40 python3 scripts/ncu_case.py --op $1 --impl $2 --case $3 --timeline 2>&1 | grep -v -i "warn" | cut -c1-150
done; echo "total $((SECONDS-start))s"
