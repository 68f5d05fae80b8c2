#!/usr/bin/env bash
# Build and install Dao-AILab's causal-conv1d from its PyPI sdist on a CUDA machine with
# no network, for the current GPU's architecture only.
#   here:      pip download --no-deps --no-binary :all: --no-build-isolation \
#                causal-conv1d==1.7.0 -d .whl      (with CAUSAL_CONV1D_SKIP_CUDA_BUILD=TRUE)
#   GPU host:  bash scripts/install_dao.sh .whl/causal_conv1d-1.7.0.tar.gz   (~8 min on an H200)
# setup.py ignores TORCH_CUDA_ARCH_LIST and compiles for ~9 architectures, so the gencode
# list is patched to the one GPU; FORCE_BUILD stops it from trying to download a wheel.
set -euo pipefail
sdist=${1:-.whl/causal_conv1d-1.7.0.tar.gz}
work=$(mktemp -d)
tar xzf "$sdist" -C "$work"
src=$(echo "$work"/causal_conv1d-*)
arch=${BWD_SUITE_CUDA_ARCH:-$(python3 -c 'import torch; a, b = torch.cuda.get_device_capability(); print(f"{a}{b}")')}
python3 - "$src/setup.py" "$arch" <<'PY'
import sys
path, arch = sys.argv[1], sys.argv[2]
text = open(path).read()
old = "                + cc_flag\n            ),"
if old not in text:
    sys.exit("setup.py changed shape: patch its gencode list by hand")
open(path, "w").write(text.replace(
    old, f'                + ["-gencode", "arch=compute_{arch},code=sm_{arch}"]\n            ),'))
PY
cd "$src"
CAUSAL_CONV1D_FORCE_BUILD=TRUE MAX_JOBS=${MAX_JOBS:-16} \
  python3 -m pip install --no-build-isolation --no-deps --no-index .
python3 -c "import causal_conv1d, causal_conv1d_cuda; print('causal_conv1d', causal_conv1d.__version__)"
