#!/usr/bin/env bash
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_COMMIT=$(cat .commit)
W=/tmp/w; mkdir -p $W; start=$SECONDS; el() { echo "$((SECONDS-start))s"; }
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/liger_kernel-*.whl > $W/liger.log 2>&1
export PYTHONPATH=.:/tmp/site BWD_SUITE_CACHE=/tmp/cache
LOGS=$W REPEATS=2 PEERS=liger VARIANT_TIMEOUT=330 bash scripts/gpu_variants.sh softmax=benchmarks/variants/softmax_rows.toml | grep -v "^liger\|^cuda " ; echo "variants $(el)"
python3 - <<'PY' | tee $W/ratios.txt
import pandas as pd
d = pd.read_parquet("/tmp/w/variants_softmax_rows.parquet")
p = d.pivot_table(index="case_id", columns="impl", values="frac_copy_bw")
print(p.round(3).rename(index=lambda s: s.split("/", 1)[1][:40]).to_string())
PY
tar czf $OUT/r.tgz -C $W --exclude cache .; echo "total $(el)"
