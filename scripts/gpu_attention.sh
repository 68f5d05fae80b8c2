#!/usr/bin/env bash
# One device call for attention's backward, in steps (STEPS, default all, in this order):
#   findings  the findings file for the fused backends (their known failures, no timing)
#   perf      calibrate, then the perf profile timed: each backend's backward alone
#   bare      a bare CUDA-event loop around the same calls, beside the suite's times
#   matrix    the conformance matrix on the gpu profile, 10 repeats, no timing
#   (ceverify runs first, flex last: it takes what the deadline leaves)
#   flex      FlexAttention on the gpu profile's cases named by FLEX_CASES (all: every
#             case; it compiles per shape, so FLEX_WORKERS processes (default 6) share the
#             GPU, untimed, and the deadline may cut it: rows are kept)
#   fuzz      FUZZ_TIME seconds of `fuzz --size gpu` for each pinned backend in FUZZ
#   ce        the cross-entropy probe (scripts/ce_probe.py)
#   ceverify  cross entropy's kernel on its findings, features and GPU tests
#             (scripts/gpu_ce_verify.sh)
# each bounded by what is left of DEADLINE seconds.
#   device run: [DEADLINE=540] [STEPS="perf bare"] [PERF=impls] [MATRIX=impls] [FLEX_CASES=all] bash scripts/gpu_attention.sh
# Out: $OUT/attention.log (everything printed), $OUT/attention.tgz (results and logs).
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_CACHE=/tmp/cache
start=$SECONDS; deadline=${DEADLINE:-540}
work=/tmp/attn; rm -rf "$work"; mkdir -p "$work"
left() { echo $(( deadline - (SECONDS - start) )); }
STEPS=${STEPS:-findings perf bare matrix flex ce}
PERF=${PERF:-torch_flash,torch_efficient,torch_cudnn,torch_sdpa,torch_flex}
MATRIX=${MATRIX:-torch_ref,torch_flash,torch_efficient,torch_efficient_mask,torch_cudnn,torch_cudnn_mask,torch_sdpa}
FUSED=torch_flash,torch_efficient,torch_efficient_mask,torch_cudnn,torch_cudnn_mask,torch_sdpa
FINDINGS=${FINDINGS:-$FUSED}
FLEX_CASES=${FLEX_CASES:-windows,softcap,masks,large-scores,short-keys,empty-,long-packed,features}
FLEX_WORKERS=${FLEX_WORKERS:-6}
FUZZ=${FUZZ:-torch_cudnn,torch_efficient,torch_flash}; FUZZ_TIME=${FUZZ_TIME:-80}
has() { [[ " $STEPS " == *" $1 "* ]]; }
summary() {  # verdict counts per implementation, then the failures' reasons
python3 - "$1" <<'EOF' 2>&1 | head -n 50
import sys
from bwd_suite.suite import results
df = results.read_results([sys.argv[1]])
print(df.groupby(["impl", "verdict"]).size().unstack(fill_value=0).to_string())
print("known failures failing:", int((df.known_failure.notna() & (df.verdict == "fail")).sum()),
      "passing:", int((df.known_failure.notna() & (df.verdict == "pass")).sum()))
bad = df[df.verdict.isin(["fail", "error"]) & df.known_failure.isna()]
for _, r in bad.head(12).iterrows():
    print(f"  {r.impl} {r.case_id}: {str(r.reason)[:200]}")
for _, r in df[df.known_failure.notna() & (df.verdict == "fail")].head(30).iterrows():
    print(f"  known {r.impl} {r.case_id}: [{r.diagnosis_cause}] {str(r.diagnosis)[:200]}")
for _, r in df[df.known_failure.notna() & (df.verdict == "pass")].head(8).iterrows():
    print(f"  unexpected pass: {r.impl} {r.case_id}")
EOF
}
main() {
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
if has ceverify; then
  timeout 240 bash scripts/gpu_ce_verify.sh 2>&1 | tail -n 20
  echo "ceverify after $(( SECONDS - start )) s"
fi
if has findings; then
  timeout $(( $(left) / 6 )) python3 -m bwd_suite run --cases cases/attention/findings.toml --profile gpu \
    --impl "$FINDINGS" --repeats 3 --no-timing --quiet --output "$work/findings.parquet" > "$work/findings.txt" 2>&1
  echo "findings: exit $? after $(( SECONDS - start )) s"; summary "$work/findings.parquet"
fi
if has perf; then
  timeout 120 python3 -m bwd_suite calibrate 2>&1 | tail -n 5
  timeout $(( $(left) / 2 )) python3 -m bwd_suite run --profile perf --op attention --impl "$PERF" \
    --output "$work/perf.parquet" > "$work/perf.txt" 2>&1
  echo "perf: exit $? after $(( SECONDS - start )) s"
  grep -E "^attention" "$work/perf.txt" | cut -c1-200
  summary "$work/perf.parquet"
fi
if has bare && [ -f "$work/perf.parquet" ]; then
  timeout $(( $(left) / 2 )) python3 scripts/attention_bare_loop.py "$work/perf.parquet" --reps 30 2>&1 | tail -n 45
  echo "bare loop after $(( SECONDS - start )) s"
fi
if has matrix; then
  timeout $(( $(left) - 60 )) python3 -m bwd_suite run --profile gpu --op attention --impl "$MATRIX" \
    --repeats 10 --no-timing --quiet --output "$work/gpu.parquet" > "$work/gpu.txt" 2>&1
  echo "gpu profile: exit $? after $(( SECONDS - start )) s"; summary "$work/gpu.parquet"
fi
if has fuzz; then
  for impl in ${FUZZ//,/ }; do
    timeout $(( FUZZ_TIME + 60 )) python3 -m bwd_suite fuzz --op attention --impl "$impl" --size gpu \
      --time "$FUZZ_TIME" --seed 5 --quiet --output "$work/fuzz-$impl.parquet" > "$work/fuzz-$impl.txt" 2>&1
    echo "fuzz $impl: exit $? after $(( SECONDS - start )) s"; tail -n 25 "$work/fuzz-$impl.txt" | cut -c1-240
  done
fi
if has flex; then
  sel=(); [ "$FLEX_CASES" = all ] || for c in ${FLEX_CASES//,/ }; do sel+=(--case "attention/$c"); done
  timeout $(( $(left) - 25 )) python3 -m bwd_suite run --profile gpu --op attention --impl torch_flex \
    "${sel[@]}" --repeats 10 --no-timing --workers "$FLEX_WORKERS" --share-gpus --quiet \
    --output "$work/flex.parquet" > "$work/flex.txt" 2>&1
  echo "flex: exit $? after $(( SECONDS - start )) s"; summary "$work/flex.parquet"
fi
if has ce; then
  python3 -m bwd_suite prebuild --op cross_entropy > "$work/prebuild.log" 2>&1
  timeout 60 python3 scripts/ce_probe.py 2>&1 | tail -n 30
fi
}
main > "$OUT/attention.log" 2>&1
tar czf "$OUT/attention.tgz" -C "$work" . 2>/dev/null
cat "$OUT/attention.log"
