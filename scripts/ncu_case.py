"""Launch one implementation's backward on one case a few times, for a profiler to pick a
launch (Nsight Compute on the GPU machine):

    ncu --clock-control none -k regex:piped --launch-skip 2 --launch-count 1 \\
        python3 scripts/ncu_case.py --op layer_norm --impl cuda --case M16384-N4096-bf16

--case takes any part of a case id (the first match in cases/ wins; `python -m suite list
--op OP --ids` shows ids); the inputs are the case's own (seeded, its dtype and layout), the
outputs allocated once outside the launches, as the suite times them. No golden is
computed and nothing is checked: correctness is the suite's job.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from suite import registry  # noqa: E402
from suite.cases import load_cases  # noqa: E402
from suite.errors import SuiteInputError, run_script  # noqa: E402
from suite.runner import _timed_call  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--op", required=True, help="op name, e.g. layer_norm")
    ap.add_argument("--impl", required=True, help="implementation name, e.g. cuda")
    ap.add_argument("--case", required=True, help="part of a case id (first match wins)")
    ap.add_argument("--launches", type=int, default=4, help="backward calls (default 4)")
    ap.add_argument("--device", default="cuda", help="torch device (default cuda)")
    a = ap.parse_args(argv)
    spec = registry.op(a.op, where="--op")
    cases = [c for c in load_cases(op=a.op) if a.case in c.id]
    if not cases:
        raise SuiteInputError("--case", f"no {a.op} case id contains {a.case!r}")
    impls = {i.name: i for i in registry.implementations(a.op)}
    if a.impl not in impls:
        raise SuiteInputError("--impl", f"{a.impl!r} is not one of {sorted(impls)}")
    impl, case, device = impls[a.impl], cases[0], torch.device(a.device)
    why = impl.unsupported_reason(case.params, device.type)
    if why:
        raise SuiteInputError("--impl", f"{a.impl} does not run {case.id}: {why}")
    inputs = spec.make_inputs(case.params, case.seed, device)
    call = _timed_call(spec, impl, SimpleNamespace(inputs=inputs, case=case))
    for _ in range(a.launches):
        call()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    print(f"{a.launches} launches of {a.op}/{a.impl} on {case.id}")
    return 0


if __name__ == "__main__":
    run_script(main, "ncu_case")
