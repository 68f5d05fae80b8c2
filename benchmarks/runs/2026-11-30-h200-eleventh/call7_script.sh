#!/usr/bin/env bash
# eleventh session, call 7: results schema 5 on the GPU: the timing tests, and one small
# timed run whose rows must say timing_pacing = hold
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_COMMIT=$(cat .commit) PYTHONPATH=. BWD_SUITE_CACHE=/tmp/cache
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_timing.py tests/test_results.py tests/test_regression.py > $OUT/pytest.log 2>&1
echo "pytest $?"; tail -1 $OUT/pytest.log
timeout 60 python3 -m suite run --op softmax --impl torch_ref --profile perf --case targets-8192x1024 --repeats 1 --quiet --output $OUT/x.parquet > $OUT/run.log 2>&1
echo "run $?"
python3 -c "import pandas as pd; d=pd.read_parquet('$OUT/x.parquet'); print(d[['case_id','timing_method','timing_pacing','time_warmup','time_median_s']].to_string())"
