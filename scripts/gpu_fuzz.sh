#!/usr/bin/env bash
# One device call: fuzz each implementation, ours and the vendors', side by side on the one
# GPU for FUZZ_TIME seconds of drawing each, then shrink what failed; bring back every row.
#   device run: [FUZZ_TIME=S] [SEED=1] [IMPLS="op:impl[:seed] ..."] bash scripts/gpu_fuzz.sh
#   (a pair may name its own seed: two seeds of one implementation fuzz side by side;
#   FUZZ_ARGS, e.g. "--shrink-tries 30", go to every fuzz command)
#   carry: .whl (Liger's wheel) and .dao (Dao's build, scripts/dao_site.sh); without them the
#   vendors' runs refuse with the reason and end.
# Out: $OUT/fuzz_blocks.toml (every shrunk failure as a [[case]] block, for
# cases/<op>/findings.toml), $OUT/fuzz.tgz (results parquet files and logs, one file so that
# the call's file count stays low). DEADLINE (default 560 s) bounds the whole call.
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_CACHE=/tmp/cache
start=$SECONDS; deadline=${DEADLINE:-560}
work=/tmp/fuzz; mkdir -p "$work"
path=.
if ls .whl/liger_kernel-*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/liger_kernel-*.whl \
    && path="$path:/tmp/site"
fi
if [ -f .dao/dao_site.tgz.part-aa ]; then
  bash scripts/dao_site.sh unpack .dao /tmp/dao > "$work/dao.log" 2>&1 && path="$path:/tmp/dao"
fi
export PYTHONPATH=$path
# the extensions built side by side: about a minute instead of three
for op in causal_conv1d layer_norm softmax adamw; do
  python3 -m bwd_suite prebuild --op "$op" > "$work/prebuild_$op.log" 2>&1 &
done
wait
cat "$work"/prebuild_*.log
IMPLS=${IMPLS:-"causal_conv1d:cuda causal_conv1d:dao causal_conv1d:dao_det layer_norm:cuda layer_norm:liger softmax:cuda softmax:liger"}
# drawing time; what is left goes to shrinking and bringing the files back
T=${FUZZ_TIME:-$(( deadline - (SECONDS - start) - 150 ))}
for pair in $IMPLS; do
  IFS=: read -r op impl seed <<< "$pair"; seed=${seed:-${SEED:-1}}
  name="${op}_${impl}_s${seed}"
  ( timeout $(( deadline - (SECONDS - start) - 20 )) python3 -m bwd_suite fuzz --op "$op" \
      --impl "$impl" --size "${SIZE:-gpu}" --time "$T" --seed "$seed" --quiet ${FUZZ_ARGS:-} \
      --output "$work/fuzz_$name.parquet" > "$work/fuzz_$name.toml" 2> "$work/fuzz_$name.log"
    echo "fuzz $op $impl: exit $? after $(( SECONDS - start )) s" >> "$work/fuzz_$name.log" ) &
done
wait
for f in "$work"/fuzz_*.log; do tail -4 "$f" | cut -c1-300; done
cat "$work"/fuzz_*.toml > "$OUT/fuzz_blocks.toml"
head -c 20000 "$OUT/fuzz_blocks.toml"
tar czf "$OUT/fuzz.tgz" -C "$work" .
