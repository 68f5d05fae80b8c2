#!/usr/bin/env bash
# One device call timing kernel variants (scripts/kernel_variants.py) of one or more ops,
# each file's variants beside the op's shipped kernel in one suite run; logs and parquet
# under LOGS (default $OUT).
#   device run: bash scripts/gpu_variants.sh OP=FILE[@CASE] ...
#   e.g. bash scripts/gpu_variants.sh softmax=benchmarks/variants/my_idea.toml \
#        causal_conv1d=benchmarks/variants/other_idea.toml@-cf-   (@: only case ids with -cf-)
#   REPEATS (determinism repeats, default 3), VARIANT_TIMEOUT (seconds a file, default 300),
#   PROFILE (the cases' profile, default perf; gpu for correctness), PEERS (other
#   implementations timed in the same run, e.g. liger,torch_ref), TWIN=1 (also the shipped
#   sources as cuda+twin, timed last: the control for the order), L2_FLUSH (clean, dirty,
#   none; default clean), WARMUP_MS (each timing's warm-up, suite.timing; default 25)
set -uo pipefail
export PYTHONPATH="${PYTHONPATH:-.}" PYTHONUNBUFFERED=1 BWD_SUITE_CACHE="${BWD_SUITE_CACHE:-$OUT/cache}"
logs="${LOGS:-$OUT}"; mkdir -p "$logs"
python3 -m bwd_suite calibrate
for spec in "$@"; do
  op=${spec%%=*}; rest=${spec#*=}; file=${rest%%@*}
  case_args=(); [[ $rest == *@* ]] && case_args=("--case=${rest#*@}")  # = : a case may start with -
  name=$(basename "$file" .toml)
  timeout "${VARIANT_TIMEOUT:-300}" python3 scripts/kernel_variants.py --op "$op" \
    --variants "$file" "${case_args[@]}" --profile "${PROFILE:-perf}" --repeats "${REPEATS:-3}" \
    ${PEERS:+--with "$PEERS"} ${TWIN:+--twin} ${L2_FLUSH:+--l2-flush "$L2_FLUSH"} ${WARMUP_MS:+--warmup-ms "$WARMUP_MS"} --output "$logs/variants_$name.parquet" > "$logs/variants_$name.log" 2>&1
  echo "variants $name exit $?"; grep -v "^building" "$logs/variants_$name.log" | tail -25 | cut -c1-220
done
