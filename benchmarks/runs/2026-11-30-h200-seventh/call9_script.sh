#!/usr/bin/env bash
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_COMMIT=$(cat .commit)
W=$OUT; start=$SECONDS; el() { echo "$((SECONDS-start))s"; }
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/liger_kernel-*.whl > /dev/null 2>&1
export PYTHONPATH=.:/tmp/site BWD_SUITE_CACHE=/tmp/cache
python3 -c "from kernels.layer_norm import cuda; cuda.extension()" > /dev/null 2>&1; echo "built $? $(el)"
(timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 python3 -m suite run --profile smoke --op layer_norm --impl cuda --no-timing --repeats 1 --quiet --out /tmp/san_r > $W/race_smoke.log 2>&1; echo "racecheck smoke exit $? $(grep -h 'RACECHECK SUMMARY\|ERROR SUMMARY' $W/race_smoke.log)") &
(timeout 100 compute-sanitizer --tool racecheck python3 s7_race.py 3 1024 bfloat16 > $W/race_3_1024.log 2>&1; echo "racecheck 3x1024 exit $? $(grep -h 'RACECHECK SUMMARY' $W/race_3_1024.log)") &
timeout 120 python3 -m pytest -n 6 -q -p no:cacheprovider cases tests/test_layer_norm*.py --suite-op layer_norm --suite-impl cuda > $W/pytest_ln.log 2>&1; echo "pytest ln $? $(el)"; tail -n 1 $W/pytest_ln.log | cut -c1-200
wait; echo "sanitized $(el)"
timeout 120 python3 -m suite run --profile perf --op layer_norm --impl cuda,liger --quiet --repeats 3 --output $W/perf_ln.parquet > $W/perf_ln.log 2>&1; echo "perf $? $(el)"; tail -6 $W/perf_ln.log | cut -c1-160
python3 -c "
import pandas as pd; d=pd.read_parquet('$W/perf_ln.parquet'); print(d.pivot_table(index='case_id',columns='impl',values='frac_copy_bw').round(3).to_string())"
