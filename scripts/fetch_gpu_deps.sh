#!/usr/bin/env bash
# Run HERE (a machine that reaches PyPI), before a GPU session: fetch the vendor packages
# the GPU machine cannot download into .whl/ (ignored by git; name it in the device
# call's `carry`). There, scripts/install_dao.sh builds Dao's sdist and
#   python3 -m pip install --no-deps --no-index .whl/liger_kernel-*.whl
# installs Liger (pure Python on top of the image's triton).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .whl
CAUSAL_CONV1D_SKIP_CUDA_BUILD=TRUE python3 -m pip download --no-deps --no-binary :all: \
  --no-build-isolation causal-conv1d==1.7.0 -d .whl
python3 -m pip download --no-deps liger-kernel==0.8.5 -d .whl
ls -l .whl
