#!/usr/bin/env bash
# call 4: CE copies in commit groups reduced as they land (g4, g8) vs shipped + twin; g4's gpu profile
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_CACHE=/tmp/cache PYTHONPATH=.
start=$SECONDS; deadline=${DEADLINE:-360}
L=/tmp/logs; mkdir -p $L
lim() { local l=$(( deadline - (SECONDS - start) - ${2:-15} )); [ $l -lt 1 ] && l=1; [ $l -lt $1 ] && echo $l || echo $1; }
at() { echo "[$((SECONDS - start)) s] $*"; }
python3 -m suite prebuild --op cross_entropy > $L/prebuild_ce.log 2>&1 &
python3 -m suite calibrate > $L/calibrate.log 2>&1 &
wait; tail -qn1 $L/prebuild_ce.log | cut -c1-200; tail -n1 $L/calibrate.log; at prebuilt
timeout -s INT -k 10 $(lim 200 90) python3 scripts/kernel_variants.py --op cross_entropy --variants .gpu/ce_groups.toml --twin --repeats 2 --case B1-T8192 --output $OUT/ce_groups.parquet > $L/ce_groups.log 2>&1
at "variants exit $?"; grep -v "^frame\|^'" $L/ce_groups.log | tail -n 8 | cut -c1-200
git apply .gpu/ce_groups.patch && at "g4 applied"
timeout -s INT -k 10 $(lim 90) python3 -m suite run --op cross_entropy --profile gpu --impl cuda --no-timing --repeats 2 --quiet --output $OUT/gpu_ce_g4.parquet > $L/run_gpu_ce_g4.log 2>&1
at "ce gpu g4 exit $?"; grep -v "^frame\|^'" $L/run_gpu_ce_g4.log | tail -n 6 | cut -c1-200
tar czf $OUT/logs.tgz -C /tmp logs; at end
