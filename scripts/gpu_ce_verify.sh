#!/usr/bin/env bash
# One short device call: cross entropy's kernel against its fuzz findings, the features cases
# of the gpu profile, and its GPU tests (after a change to its gradient arithmetic).
set -uo pipefail
export PYTHONUNBUFFERED=1
python3 -m bwd_suite prebuild --op cross_entropy 2>&1 | tail -1
python3 -m bwd_suite run --profile gpu --cases cases/cross_entropy/findings.toml --impl cuda --no-timing --quiet --output /tmp/f.parquet 2>&1 | grep -E " passed, |FAIL"
python3 -m bwd_suite run --profile gpu --op cross_entropy --case features/ --impl cuda --no-timing --quiet --output /tmp/g.parquet 2>&1 | grep -E " passed, |FAIL"
python3 -m pytest -q -p no:cacheprovider -x tests/cross_entropy/test_cuda_kernel.py tests/cross_entropy/test_in_place.py 2>&1 | tail -1
