#!/usr/bin/env bash
# one call: build, GPU tests, adamw perf (quiet), cross_entropy conformance, cross_entropy perf
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_CACHE=/tmp/cache
start=$SECONDS; deadline=${DEADLINE:-575}
left() { echo $(( deadline - (SECONDS - start) )); }
lim() { local want=$1 l; l=$(( $(left) - 15 )); [ $l -lt 1 ] && l=1; [ $l -lt $want ] && echo $l || echo $want; }
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/liger_kernel-*.whl
export PYTHONPATH=.:/tmp/site
for op in adamw cross_entropy; do python3 -m suite prebuild --op "$op" > /tmp/prebuild_$op.log 2>&1 & done
python3 -m suite calibrate > /tmp/calibrate.log 2>&1 &
wait; tail -1 /tmp/prebuild_*.log; tail -2 /tmp/calibrate.log; echo "prebuilt at $((SECONDS-start))"
timeout -s INT -k 20 $(lim 210) python3 -m suite run --op adamw --profile perf --repeats 3 --quiet --output $OUT/perf_adamw.parquet > $OUT/run_perf_adamw.log 2>&1
echo "perf adamw exit $? at $((SECONDS-start))"; grep -v "^frame\|^'" $OUT/run_perf_adamw.log | tail -24 | cut -c1-260
timeout $(lim 70) python3 -m pytest -q -p no:cacheprovider tests/adamw/test_cuda_kernel.py tests/harness/test_launches.py tests/cross_entropy/test_cuda_kernel.py tests/harness/test_peak_memory.py -rfE > $OUT/pytest_gpu_tests.log 2>&1
echo "gpu tests exit $? at $((SECONDS-start))"; grep -E "passed|failed|^FAILED|^E " $OUT/pytest_gpu_tests.log | head -24 | cut -c1-300
timeout $(lim 90) python3 -m pytest -n 8 -q -p no:cacheprovider cases --suite-op cross_entropy --suite-impl liger,torch_ref,torch_fp32,cuda -rfEX > $OUT/pytest_ce.log 2>&1
echo "pytest cross_entropy exit $? at $((SECONDS-start))"; grep -E "^(FAILED|XPASS|ERROR)" $OUT/pytest_ce.log | cut -c1-220 | head -30; tail -1 $OUT/pytest_ce.log
timeout -s INT -k 15 $(lim 150) python3 -m suite run --op cross_entropy --profile perf --repeats 3 --quiet --output $OUT/perf_ce.parquet > $OUT/run_perf_ce.log 2>&1
echo "perf ce exit $? at $((SECONDS-start))"; grep -v "^frame\|^'" $OUT/run_perf_ce.log | tail -16 | cut -c1-260
python3 - <<'PY'
import pandas as pd, os, glob
pd.set_option("display.width", 250); pd.set_option("display.max_rows", 200); pd.set_option("display.max_colwidth", 64)
cols = ["case_id", "impl", "verdict", "time_median_s", "wall_median_ms", "launches", "frac_copy_bw", "peak_mem_bytes"]
for f in sorted(glob.glob(os.environ["OUT"] + "/perf_*.parquet")):
    d = pd.read_parquet(f)
    print(f); print(d[[c for c in cols if c in d.columns]].to_string())
PY
t0=$SECONDS; timeout $(lim 25) python3 .gpu/exit_probe.py; echo "probe exit $? took $((SECONDS-t0)) s"
echo "end at $((SECONDS-start))"
