#!/usr/bin/env bash
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=. BWD_SUITE_CACHE=/tmp/cache
W=$OUT; start=$SECONDS; el() { echo "$((SECONDS-start))s"; }
python3 -c "from kernels.layer_norm import cuda; cuda.extension()" > $W/build.log 2>&1; echo "built $? $(el)"
for shape in "3 32 bfloat16" "3 32 float32" "1000 32 float32" "3 1024 bfloat16" "5 100 float32" "37 33 float32" "37 33 bfloat16" "5 20000 bfloat16" "300 2048 float32" "7 4096 float32"; do
  tag=$(echo $shape | tr ' ' _)
  (timeout 100 compute-sanitizer --tool racecheck python3 s7_race.py $shape > $W/race_$tag.log 2>&1
   echo "racecheck $tag exit $? $(grep -h 'RACECHECK SUMMARY' $W/race_$tag.log) $(grep -h -o 'at [a-z_:<>()0-9, A-Z&\[\]]*+0x' $W/race_$tag.log | sort | uniq -c | tr '\n' ' ' | cut -c1-300)") &
done; wait; echo "total $(el)"
