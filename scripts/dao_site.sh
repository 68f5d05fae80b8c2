#!/usr/bin/env bash
# Keep a built Dao causal-conv1d between GPU machines (each starts bare, and the build
# takes 5-7 minutes): pack the installed package into parts small enough to come back from
# a device call (under 16 MiB each), and unpack them on a later machine.
#   after scripts/install_dao.sh:  bash scripts/dao_site.sh pack $OUT      (-> dao_site.tgz.part-*)
#   here:                          mkdir -p .dao && cp <fetched parts> .dao/   (.dao/ is ignored;
#                                  carry it in the next call)
#   next GPU machine:              bash scripts/dao_site.sh unpack .dao /tmp/dao
#                                  export PYTHONPATH=.:/tmp/dao
# The parts hold a build for one torch, CUDA and GPU architecture: unpack them only on the
# same image.
set -euo pipefail
cmd=${1:?usage: dao_site.sh pack OUTDIR | unpack PARTSDIR TARGET}
case $cmd in
  pack)
    out=${2:?pack needs OUTDIR}
    mapfile -t where < <(python3 -c "import os, causal_conv1d, causal_conv1d_cuda
print(os.path.dirname(causal_conv1d.__file__)); print(causal_conv1d_cuda.__file__)")
    pkg=${where[0]}; so=${where[1]}
    [ "$(dirname "$pkg")" = "$(dirname "$so")" ] || { echo "package and extension in different folders: $pkg, $so" >&2; exit 1; }
    tmp=$(mktemp -d)
    tar czf "$tmp/dao_site.tgz" -C "$(dirname "$pkg")" "$(basename "$pkg")" "$(basename "$so")"
    split -b 15M "$tmp/dao_site.tgz" "$out/dao_site.tgz.part-"
    rm -rf "$tmp"; ls -l "$out"/dao_site.tgz.part-* ;;
  unpack)
    parts=${2:?unpack needs PARTSDIR}; target=${3:?unpack needs TARGET}
    compgen -G "$parts/dao_site.tgz.part-*" > /dev/null || { echo "no $parts/dao_site.tgz.part-*" >&2; exit 1; }
    mkdir -p "$target"
    cat "$parts"/dao_site.tgz.part-* | tar xzf - -C "$target"
    PYTHONPATH="$target:${PYTHONPATH:-}" python3 -c "import causal_conv1d, causal_conv1d_cuda; print('causal_conv1d', causal_conv1d.__version__, 'from $target')" ;;
  *) echo "unknown command $cmd: pack OUTDIR | unpack PARTSDIR TARGET" >&2; exit 2 ;;
esac
