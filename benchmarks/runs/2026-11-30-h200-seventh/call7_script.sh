#!/usr/bin/env bash
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=. BWD_SUITE_CACHE=/tmp/cache
W=$OUT; start=$SECONDS; el() { echo "$((SECONDS-start))s"; }
python3 -c "from kernels.layer_norm import cuda; cuda.extension()" > $W/build.log 2>&1; echo "built $? $(el)"
# one group a block (8192 columns: 512 or 1024 threads a row) against several (1024 columns)
for shape in "256 8192 bfloat16" "256 8192 float32" "256 1024 bfloat16" "256 1024 float32"; do
  tag=$(echo $shape | tr ' ' _)
  (timeout 150 compute-sanitizer --tool racecheck python3 s7_race.py $shape > $W/race_$tag.log 2>&1
   echo "racecheck $tag exit $? $(grep -c 'Race reported\|Error: ' $W/race_$tag.log) $(grep -h 'ERROR SUMMARY\|RACECHECK SUMMARY' $W/race_$tag.log | tr '\n' ' ')") &
done; wait; echo "total $(el)"
for f in $W/race_*.log; do echo "== $f"; grep -v "^=========     \|^=========$" $f | sort | uniq -c | sort -rn | head -8 | cut -c1-230; done
