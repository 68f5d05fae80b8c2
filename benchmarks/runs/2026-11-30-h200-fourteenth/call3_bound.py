"""Fourteenth session, call 3: softmax backward against the bound of its access pattern.
dx = y * (dy - sum(dy * y)) reads two tensors and writes one; so does torch.add(y, dy,
out=dx), PyTorch's vectorized elementwise kernel, with no reduction at all. In one process,
for each softmax perf case without dropout, three interleaved rounds of: ours (cuda),
Liger, torch.add on the case's own tensors, each timed as the suite times a case
(suite.timing.time_call: clean L2 flush, 25 ms warm-up, 20 samples, events)."""
import statistics, sys
from types import SimpleNamespace
import torch
sys.path.insert(0, ".")
from suite import registry
from suite.cases import load_cases
from suite.runner import _timed_call
from suite.timing import time_call

dev = torch.device("cuda")
spec = registry.op("softmax")
impls = {i.name: i for i in registry.implementations("softmax")}
cases = [c for c in load_cases(op="softmax", profile="perf") if not c.params["dropout"]]
calls = {}
for c in cases:
    inputs = spec.make_inputs(c.params, c.seed, dev)
    y, dy = inputs.tensors["y"], inputs.tensors["dy"]
    dx = torch.empty_like(y)
    calls[c.id] = {name: _timed_call(spec, impls[name], SimpleNamespace(inputs=inputs, case=c))
                   for name in ("cuda", "liger")}
    calls[c.id]["torch.add"] = (lambda y=y, dy=dy, dx=dx: torch.add(y, dy, out=dx))
med = {}
for rnd in range(3):
    for cid, fns in calls.items():
        for name, fn in fns.items():
            med.setdefault((cid, name), []).append(time_call(fn, dev, repeats=20).median_s * 1e6)
    print(f"round {rnd} done", flush=True)
print(f"{'case':32s} {'cuda us':>9s} {'liger us':>9s} {'add us':>9s}  add/cuda  add/liger  (per round: cuda, liger, add)")
for cid in calls:
    m = {n: statistics.median(med[(cid, n)]) for n in calls[cid]}
    per = "  ".join(f"{a:.1f},{b:.1f},{c:.1f}" for a, b, c in zip(*(med[(cid, n)] for n in calls[cid])))
    print(f"{cid.split('/')[-1]:32s} {m['cuda']:9.1f} {m['liger']:9.1f} {m['torch.add']:9.1f}"
          f"  {m['torch.add'] / m['cuda']:8.3f}  {m['torch.add'] / m['liger']:9.3f}  ({per})")
