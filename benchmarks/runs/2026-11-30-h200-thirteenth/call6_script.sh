#!/usr/bin/env bash
# thirteenth session, call 6: where the time goes, ours against the peer that is level or
# ahead (scripts/ncu_case.py --timeline: the suite's timing under torch.profiler):
# softmax 131072x2048 bf16 and 4096x8192 fp32 (cuda, liger); conv1d 2,8192,8192,4 fp32
# channel-first (cuda, dao)
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_COMMIT=$(cat .commit)
W=/tmp/w13_6; rm -rf $W; mkdir -p $W; start=$SECONDS
pack() { tar czf $OUT/r.tgz -C $W --exclude cache .; }
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/liger_kernel-*.whl > $W/liger.log 2>&1
bash scripts/dao_site.sh unpack .dao /tmp/dao > $W/dao_unpack.log 2>&1
export BWD_SUITE_CACHE=$W/cache PYTHONPATH=.:/tmp/site:/tmp/dao
python3 -c "from kernels.causal_conv1d.cuda import extension; extension()" > $W/build_conv1d.log 2>&1 &
tl() { echo "== $1 $2 $3"; timeout 90 python3 scripts/ncu_case.py --op $1 --impl $2 --case $3 --timeline --samples 20 2>&1 | grep -vi warn | cut -c1-160; echo "($((SECONDS-start))s)"; }
{ for c in R131072-N2048-bf16 R4096-N8192-fp32; do for i in cuda liger; do tl softmax $i $c; done; done; } > $W/timeline_softmax.log 2>&1
cat $W/timeline_softmax.log; pack; wait
{ for i in cuda dao; do tl causal_conv1d $i B2-D8192-L8192-K4-fp32-cf; done; } > $W/timeline_conv1d.log 2>&1
cat $W/timeline_conv1d.log; pack
