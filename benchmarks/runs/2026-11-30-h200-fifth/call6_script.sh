#!/usr/bin/env bash
set -uo pipefail
export PYTHONUNBUFFERED=1 BWD_SUITE_CACHE=/tmp/cache BWD_SUITE_COMMIT=$(cat .commit)
W=/tmp/w; mkdir -p $W; start=$SECONDS; el() { echo "$((SECONDS-start))s"; }
bash scripts/dao_site.sh unpack .dao /tmp/dao > $W/dao_unpack.log 2>&1; export PYTHONPATH=.:/tmp/dao
timeout 100 python3 -m pytest -n 8 -q -p no:cacheprovider -rfX cases --suite-impl dao,dao_det --suite-op causal_conv1d > $W/pytest_dao.log 2>&1; echo "dao pytest $? $(el)"; tail -1 $W/pytest_dao.log | cut -c1-200
cat > s5_fault_impl.py <<'PY'
"""Dao's kernel on a channel-last bf16 dout moved 8 bytes off a 16-byte boundary: a real
misaligned-address fault, to show the suite's handling of a lost CUDA context."""
import torch
from causal_conv1d.cpp_functions import causal_conv1d_bwd_function

def misaligned_dao(x, weight, bias, dout, seq_idx, initial_states, dfinal_states, activation, out):
    B, D, L = dout.shape
    buf = torch.empty(B * L * D + 4, dtype=dout.dtype, device=dout.device)
    d2 = buf[4:].view(B, L, D).transpose(1, 2)
    d2.copy_(dout)
    causal_conv1d_bwd_function(x, weight, bias, d2, None, None, None, out["dx"], False,
                               activation == "silu")
    torch.cuda.synchronize()
PY
timeout 100 python3 -m pytest -q -p no:cacheprovider -p no:xdist cases/causal_conv1d/upstream.toml --suite-op causal_conv1d --suite-impl s5_fault_impl:misaligned_dao,torch_ref -k "dout/B2-D48-L150-K4-bf16-cl-silu" > $W/pytest_fault.log 2>&1; echo "fault pytest $? $(el)"; grep -E "^(error|not run|fail)|passed|failed" $W/pytest_fault.log | cut -c1-260
timeout 100 python3 -m pytest -q -p no:cacheprovider -n 4 tests/test_cuda_fault.py tests/test_verdicts.py tests/test_dao_adapter.py > $W/pytest_fault_tests.log 2>&1; echo "tests $? $(el)"; tail -1 $W/pytest_fault_tests.log
tar czf $OUT/r.tgz -C $W --exclude cache .; echo "total $(el)"
