#!/usr/bin/env bash
# One device call for the training-step scenarios (docs/step.md), in steps bounded so the call
# ends by DEADLINE seconds (default 560: within one 10-minute device command):
#   build   our CUDA extensions (conv1d, LayerNorm, cross entropy, AdamW, linear), in the
#           background while eager runs (only with ours)
#   ci      the ci scenarios (tiny models, every check) under eager PyTorch and our kernels:
#           the CUDA paths of every check, in seconds
#   eager   the gpu scenarios (a 124M-parameter Mamba-style model and GPT-2 small at
#           sequence 2048, bf16 with fp32 masters) under eager PyTorch: every check against
#           float64, then the plain, checkpointed and offloaded step timed, counted and
#           ledgered
#   ours    the same with our kernels (linear: cuBLASLt with its epilogues; attention stays
#           eager: the suite has no kernel of its own for it)
#   native  the gpu scenarios under PyTorch's own autograd (F.layer_norm, SDPA: the baseline
#           without the op contract), every check, timed
#   report  one HTML page of both, and the tables for BENCHMARKS.md (scripts/step_summary.py)
#   device run: [DEADLINE=560] [STEPS="ci eager ours native"] [TIMED=7] bash scripts/gpu_step.sh
# Out: $OUT/step.log (everything printed), $OUT/summary.md, $OUT/step.html, and the runs'
# parquets and logs in $OUT/step_runs.tgz (the device returns at most 8 files).
set -uo pipefail
export PYTHONPATH=. PYTHONUNBUFFERED=1 BWD_SUITE_CACHE=/tmp/cache
start=$SECONDS; deadline=${DEADLINE:-560}
STEPS=${STEPS:-ci eager ours native}
TIMED=${TIMED:-7}
GPU_SCENARIOS=(--scenario 'step/mamba-130m$' --scenario 'step/gpt2-small$')
has() { [[ " $STEPS " == *" $1 "* ]]; }
# seconds for the next step: at most $1, and never past the deadline
lim() { local l=$(( deadline - (SECONDS - start) - 20 )); [ $l -lt 1 ] && l=1; [ $l -lt $1 ] && echo $l || echo $1; }
# the ci scenarios (every check, one timed step) or the gpu ones under --impl $1
ci_run() {
  timeout -s INT -k 10 "$(lim 60)" python3 -m bwd_suite step --profile ci --impl "$1" \
    --timed-steps 1 --output "$OUT/ci_$1.parquet" > "$OUT/ci_$1.log" 2>&1
  echo "ci $1: exit $? at $((SECONDS - start)) s"; tail -n 2 "$OUT/ci_$1.log"
}
gpu_run() {
  timeout -s INT -k 20 "$(lim 200)" python3 -m bwd_suite step --profile gpu "${GPU_SCENARIOS[@]}" \
    --impl "$1" --timed-steps "$TIMED" --output "$OUT/gpu_$1.parquet" > "$OUT/gpu_$1.log" 2>&1
  echo "gpu $1: exit $? at $((SECONDS - start)) s"; grep -E "^step/|passed" "$OUT/gpu_$1.log"
}
main() {
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
if has ours; then  # built while eager runs: only ours needs our extensions
  for op in causal_conv1d layer_norm cross_entropy adamw linear; do
    MAX_JOBS=4 python3 -m bwd_suite prebuild --op "$op" > "$OUT/prebuild_$op.log" 2>&1 &
  done
fi
has ci && ci_run eager
has eager && gpu_run eager
if has ours; then
  wait; tail -qn1 "$OUT"/prebuild_*.log; echo "built at $((SECONDS - start)) s"
  has ci && ci_run ours
  gpu_run ours
fi
has native && gpu_run native
got=$(ls "$OUT"/*.parquet "$OUT"/*.parquet.journal 2>/dev/null)
if [ -n "$got" ]; then
  timeout "$(lim 40)" python3 -m bwd_suite report $got --output "$OUT/step.html" 2>&1 | tail -n 2
  timeout "$(lim 20)" python3 scripts/step_summary.py $got --markdown > "$OUT/summary.md" 2>&1
  cat "$OUT/summary.md"
fi
echo "done at $((SECONDS - start)) s"
}
main > "$OUT/step.log" 2>&1
(cd "$OUT" && tar czf step_runs.tgz --remove-files -- *.parquet* ci_*.log gpu_*.log prebuild_*.log \
  2>/dev/null)
cat "$OUT/step.log"
