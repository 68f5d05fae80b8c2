# Does an exception cross a cpp_extension binding on this machine? Tiny CPU-only extensions.
import subprocess, sys, textwrap
src = textwrap.dedent('''
#include <torch/extension.h>
#include <stdexcept>
void torch_check(int64_t v) { TORCH_CHECK(v == 0, "torch_check refused ", v); }
void std_throw(int64_t v) { if (v) throw std::runtime_error("std_throw refused"); }
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("torch_check", &torch_check); m.def("std_throw", &std_throw); }
''')
child = textwrap.dedent('''
import sys, torch
from torch.utils.cpp_extension import load_inline
m = load_inline("exc_probe", cpp_sources=[SRC], verbose=False)
try:
    getattr(m, sys.argv[1])(1); print("no exception")
except Exception as e:
    print("raised", type(e).__name__, str(e).splitlines()[0])
''').replace("SRC", repr(src))
for fn in ["std_throw", "torch_check"]:
    r = subprocess.run([sys.executable, "-c", child, fn], capture_output=True, text=True)
    print(fn, "rc", r.returncode, r.stdout.strip(), r.stderr.strip()[-300:])
