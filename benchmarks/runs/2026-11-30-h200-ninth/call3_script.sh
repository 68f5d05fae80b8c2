#!/usr/bin/env bash
# ninth session, call 3: LayerNorm gamma_regs / l2_256 on the perf profile; softmax cache
# hints on the perf profile beside Liger; the better ones again at 4096x8192
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_COMMIT=$(cat .commit)
W=/tmp/w; mkdir -p $W; start=$SECONDS
pack() { tar czf $OUT/r.tgz -C $W --exclude cache .; }
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/liger_kernel-*.whl > $W/liger.log 2>&1
export PYTHONPATH=.:/tmp/site BWD_SUITE_CACHE=$W/cache
LOGS=$W/a REPEATS=3 VARIANT_TIMEOUT=220 bash scripts/gpu_variants.sh layer_norm=benchmarks/variants/layer_norm_gamma_regs.toml
echo "ln $((SECONDS-start))s"; pack
LOGS=$W/a REPEATS=3 PEERS=liger VARIANT_TIMEOUT=260 bash scripts/gpu_variants.sh softmax=benchmarks/variants/softmax_hints.toml
echo "sm $((SECONDS-start))s"; pack
LOGS=$W/b REPEATS=3 PEERS=liger VARIANT_TIMEOUT=120 bash scripts/gpu_variants.sh layer_norm=benchmarks/variants/layer_norm_gamma_regs.toml@4096x8192 softmax=benchmarks/variants/softmax_hints.toml@4096x8192 2>&1 | grep -v "^variants\|^cuda \|^liger \|^cuda+" 
echo "total $((SECONDS-start))s"; pack
