#!/usr/bin/env bash
# One device call for attention's backward: calibrate (copy bandwidth and GEMM peaks), the
# perf table (each backend's backward alone, timed) and the bare CUDA-event loop beside it,
# then the conformance matrix of every implementation on the gpu profile (10 repeats for
# determinism, no timing), within DEADLINE seconds; plus the cross-entropy probe.
#   device run: [DEADLINE=540] [PERF=impls] [MATRIX=impls] bash scripts/gpu_attention.sh
# Out: $OUT/attention.log (everything printed), $OUT/attention.tgz (results and logs).
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_CACHE=/tmp/cache
start=$SECONDS; deadline=${DEADLINE:-540}
work=/tmp/attn; mkdir -p "$work"
left() { echo $(( deadline - (SECONDS - start) )); }
PERF=${PERF:-torch_flash,torch_efficient,torch_cudnn,torch_sdpa,torch_flex}
MATRIX=${MATRIX:-torch_ref,torch_flash,torch_efficient,torch_efficient_mask,torch_cudnn,torch_cudnn_mask,torch_sdpa}
main() {
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
python3 -m bwd_suite prebuild --op cross_entropy > "$work/prebuild.log" 2>&1
timeout 60 python3 scripts/ce_probe.py 2>&1 | tail -n 30
timeout 120 python3 -m bwd_suite calibrate 2>&1 | tail -n 6
echo "calibrated after $(( SECONDS - start )) s"
timeout $(( $(left) / 3 )) python3 -m bwd_suite run --profile perf --op attention --impl "$PERF" \
  --output "$work/perf.parquet" > "$work/perf.txt" 2>&1
echo "perf: exit $? after $(( SECONDS - start )) s"
grep -E "^attention|ERROR|FAIL" "$work/perf.txt" | cut -c1-300 | head -n 20
timeout 100 python3 scripts/attention_bare_loop.py "$work/perf.parquet" 2>&1 | tail -n 30
echo "bare loop after $(( SECONDS - start )) s"
T=$(( $(left) - 20 ))
timeout "$T" python3 -m bwd_suite run --profile gpu --op attention --impl "$MATRIX" --repeats 10 \
  --no-timing --output "$work/gpu.parquet" > "$work/gpu.txt" 2>&1
echo "gpu profile: exit $? after $(( SECONDS - start )) s"
grep -E "^attention|^  attention" "$work/gpu.txt" | cut -c1-300 | head -n 40
python3 - "$work/gpu.parquet" <<'EOF' 2>&1 | head -n 60
import sys, pandas as pd
from bwd_suite.suite import results
df = results.read_results([sys.argv[1]])
print(df.groupby(["impl", "verdict"]).size().unstack(fill_value=0).to_string())
bad = df[df.verdict.isin(["fail", "error"])]
for impl, g in bad.groupby("impl"):
    print(f"--- {impl}: {len(g)} bad")
    for _, r in g.head(6).iterrows():
        print(f"  {r.case_id}: {str(r.reason)[:260]} | {str(r.diagnosis)[:160]}")
uns = df[df.verdict == "unsupported"]
for impl, g in uns.groupby("impl"):
    print(f"--- {impl}: unsupported {len(g)}: {g.reason.value_counts().head(3).to_dict()}")
EOF
}
main > "$OUT/attention.log" 2>&1
tar czf "$OUT/attention.tgz" -C "$work" . 2>/dev/null
cat "$OUT/attention.log"
