#!/usr/bin/env bash
# One device call for the linear backward (issue 42), in steps (STEPS, default all, in order):
#   build    ours' extension (cuBLASLt found, nvcc -Xptxas -v of each .cu), prebuild
#   tests    the linear tests (the GPU ones run here: tests/linear/test_cublaslt_gpu.py)
#   matrix   the gpu profile for every implementation, 10 repeats, no timing (determinism:
#            split-K nondeterminism shows as `nondeterministic` with its spread)
#   perf     calibrate (the GEMM peak), then the perf profile timed
#   bare     the same shapes' two plain GEMMs (scripts/linear_bare_gemms.py) beside the
#            perf run: ours / bare GEMMs and torch_unfused / ours from one run
# each bounded by what is left of DEADLINE seconds (default 470: under 8 minutes).
#   device run: [DEADLINE=470] [STEPS="build perf bare"] bash scripts/gpu_linear.sh
# Out: $OUT/linear.log (everything printed), $OUT/linear.tgz (results and logs).
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_CACHE=/tmp/cache
start=$SECONDS; deadline=${DEADLINE:-470}
work=/tmp/linear; rm -rf "$work"; mkdir -p "$work"
left() { echo $(( deadline - (SECONDS - start) )); }
STEPS=${STEPS:-build tests matrix perf bare}
IMPLS=torch_ref,torch_unfused,cublaslt,te_linear,apex_fused_dense
has() { [[ " $STEPS " == *" $1 "* ]]; }
summary() {  # verdict and determinism counts per implementation, then what failed
python3 - "$1" <<'PY' 2>&1 | head -n 60
import json, sys
from bwd_suite.suite import results
df = results.read_results([sys.argv[1]])
print(df.groupby(["impl", "verdict"]).size().unstack(fill_value=0).to_string())
print(df.groupby(["impl", "determinism"]).size().unstack(fill_value=0).to_string())
nd = df[df.determinism == "nondeterministic"]
for _, r in nd.head(10).iterrows():
    f = json.loads(r.impl_facts_json) if isinstance(r.impl_facts_json, str) else {}
    print(f"  nondeterministic {r.impl} {r.case_id}: spread {r.det_spread:.3g}; split-K "
          f"{f.get('wgrad_split_k', '?')}/{f.get('dgrad_split_k', '?')}")
for _, r in df[df.verdict.isin(["fail", "error"])].head(15).iterrows():
    print(f"  {r.verdict} {r.impl} {r.case_id}: {str(r.reason)[:220]}")
uns = df[(df.impl == "cublaslt") & (df.verdict == "unsupported")]
for why, n in uns.reason.str.slice(0, 160).value_counts().head(8).items():
    print(f"  cublaslt unsupported x{n}: {why}")
ours = df[(df.impl == "cublaslt") & df.impl_facts_json.notna()]
if len(ours):
    f = ours.impl_facts_json.map(json.loads)
    print("cublaslt epilogues:", f.map(lambda d: f"{d.get('dgrad_epilogue')}/"
                                       f"{d.get('wgrad_epilogue')}").value_counts().to_dict())
PY
}
main() {
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
if has build; then
  python3 -c "from bwd_suite.kernels.cuda_build import cuda_library as c; print('cuBLASLt:', c('cublasLt.h', 'cublasLt'))"
  inc=$(python3 -c "from bwd_suite.kernels.cuda_build import cuda_library as c; print(' '.join('-I'+i for i in c('cublasLt.h','cublasLt')[0]))")
  for f in kernels/linear/csrc/*.cu; do
    nvcc -c -std=c++17 -O3 --use_fast_math -gencode=arch=compute_90,code=sm_90 -Xptxas -v \
      $inc "$f" -o "$work/$(basename "$f").o" > "$work/ptxas_$(basename "$f").log" 2>&1
    echo "$f: exit $?; $(grep -c 'Compiling entry' "$work/ptxas_$(basename "$f").log") entries, spills: $(grep -o '[0-9]* bytes spill stores' "$work/ptxas_$(basename "$f").log" | sort -u | tr '\n' ' ')"
  done
  BWD_SUITE_BUILD_VERBOSE=1 timeout $(( $(left) / 3 )) python3 -m bwd_suite prebuild --op linear > "$work/build.log" 2>&1
  echo "prebuild: exit $? after $(( SECONDS - start )) s"; tail -n 5 "$work/build.log"
fi
if has tests; then
  timeout $(( $(left) / 4 )) python3 -m pytest -p no:cacheprovider -q tests/linear -x -rs > "$work/tests.txt" 2>&1
  echo "tests: exit $? after $(( SECONDS - start )) s"; tail -n 15 "$work/tests.txt"
fi
if has matrix; then  # leaves perf and bare their share when they follow
  if has perf; then share=$(( $(left) * 2 / 5 )); else share=$(( $(left) - 30 )); fi
  timeout "$share" python3 -m bwd_suite run --profile gpu --op linear --impl "$IMPLS" \
    --repeats 10 --no-timing --quiet --output "$work/gpu.parquet" > "$work/gpu.txt" 2>&1
  echo "gpu profile: exit $? after $(( SECONDS - start )) s"; summary "$work/gpu.parquet"
fi
if has perf; then
  timeout 90 python3 -m bwd_suite calibrate 2>&1 | tail -n 5
  timeout $(( $(left) * 2 / 3 )) python3 -m bwd_suite run --profile perf --op linear --impl "$IMPLS" \
    --repeats 3 --output "$work/perf.parquet" > "$work/perf.txt" 2>&1
  echo "perf: exit $? after $(( SECONDS - start )) s"
  grep -E "^linear|^  (cublaslt|torch)" "$work/perf.txt" | cut -c1-200 | head -n 40
  summary "$work/perf.parquet"
fi
if has bare && [ -f "$work/perf.parquet" ]; then
  timeout $(( $(left) - 10 )) python3 scripts/linear_bare_gemms.py "$work/perf.parquet" --reps 30 2>&1 | tail -n 25
  echo "bare GEMMs after $(( SECONDS - start )) s"
fi
}
main > "$OUT/linear.log" 2>&1
tar czf "$OUT/linear.tgz" -C "$work" . 2>/dev/null
cat "$OUT/linear.log"
