# Ran 2026-11-30 on the H200 against an uncommitted variant of the bindings whose checks threw
# std::runtime_error instead of TORCH_CHECK: still SIGSEGV (probe_runtime_error.log).
import subprocess, sys
code = '''
import torch
from kernels.layer_norm import cuda as c
from kernels.softmax import cuda as s
x = torch.zeros(2, 4, device="cuda")
for f in [lambda: c.extension().bwd(x, x, None, torch.zeros(3, device="cuda"), torch.zeros(2, device="cuda"), x, None, None),
          lambda: c.extension().bwd(x.int(), x, None, torch.zeros(2, device="cuda"), torch.zeros(2, device="cuda"), x, None, None)]:
    try:
        f(); print("accepted")
    except RuntimeError as e:
        print("refused:", str(e).splitlines()[0])
'''
r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
print("probe rc", r.returncode, r.stdout.strip(), r.stderr[-800:])
