"""The memory ledger of one training step by state class, measured and modelled.

Classes (seed 004's ledger): parameters, gradients, optimizer state, saved activations,
temporaries, workspace. The tool is PyTorch's MemTracker
(torch.distributed._tools.mem_tracker), not the profiler's memory categories:

- MemTracker is a dispatch mode that sees every tensor as it is made, on any device (the
  CPU tests check the classification on what the CPU gives), and attributes the step's peak
  by category (its own test holds that peak within 10% of the allocator's);
- the profiler's categories are inferred after the fact from the autograd graph and
  recognise optimizer state only through torch.optim.Optimizer, which the suite's AdamW
  (an op called through its contract) is not; so is MemTracker's own optimizer category,
  so the master weights, moments and fp32 main gradients are registered with it
  (`track_external`, its "Other") and split here by their known sizes.

The split at the step's peak: parameters = its Parameter (and Buffer) bytes; gradients =
its Gradient bytes plus the fp32 main gradients; optimizer state = master weights and
moments; saved activations = its Activation (tensors the forward made and the backward has
not freed yet); temporaries = its Temp (made in the backward) and what the optimizer made;
workspace (CUDA) = the allocator's peak less everything MemTracker saw: memory no tensor
holds (cuBLAS's workspace). The batch's ids are registered too and counted in no class
(`batch_bytes`). `saved_after_forward`: the Activation bytes
when the forward and the loss are done and the logits dropped, as the backward starts: what
checkpointing and offload move.

The model: bytes per parameter for the precision (16-bit: the parameter, an fp32 main
gradient, an fp32 master and two fp32 moments, 2 + 4 + 12 = 18 as Megatron counts; fp32:
4 + 4 + 8), and the saved activations from the blocks' shapes (ModelSpec.saved_bytes);
temporaries and workspace have no model. The activations MemTracker misattributes during a
checkpointed backward (its documented limit) sit between Activation and Temp at the peak;
`saved_after_forward` is taken before any backward. `peak_stage`: the stage (forward, loss,
backward, optimizer) in which MemTracker's peak was last raised, the stage its classes at the
peak describe (a peak in the backward holds tensors a yardstick remade there).
"""

from __future__ import annotations

import warnings
from typing import Callable, Optional

import torch

CLASSES = ("parameters", "gradients", "optimizer_state", "saved_activations", "temporaries",
           "workspace")
TOOL = "MemTracker"
# the loop's own scalars alive as the backward starts: the loss (fp32) and the step's
# float64 sum of the micro-batches' losses
LOOP_SCALARS = 4 + 8


def _nbytes(tensors) -> int:
    return sum(t.untyped_storage().nbytes() for t in tensors)


def analytic(run, device) -> dict:
    """{class: bytes} of the model (module docstring) for `run`'s dtype and variant."""
    device = torch.device(device)
    P = sum(t.numel() for t in run.tensors)
    b = torch.finfo(run.dtype).bits // 8
    sixteen = run.dtype in (torch.bfloat16, torch.float16)
    p = run.params
    per = p["batch"] // run.variant.micro_batches
    saved = 0 if run.variant.offload and device.type == "cuda" else run.spec.saved_bytes(
        p, per, p["seq"], run.dtype, run.variant.checkpoint) + LOOP_SCALARS
    return {"parameters": P * b, "gradients": P * (4 if sixteen else b),
            "optimizer_state": P * ((4 if sixteen else 0) + 8), "saved_activations": saved}


def _on(snapshot: dict, device: torch.device) -> dict:
    """A MemTracker snapshot's entry of `device`, keyed by category name."""
    for dev, cats in snapshot.items():
        if dev.type == device.type and (device.index is None or dev.index in (None,
                                                                              device.index)):
            return {getattr(k, "value", k): v for k, v in cats.items()}
    return {}


class _Marks:
    """The stages callable of a tracked step: the Activation bytes after the loss, the stage
    that raised the peak last, and MemTracker told the optimizer is running (its own flag,
    set by torch.optim's hooks)."""

    def __init__(self, tracker, device):
        self.tracker, self.device, self.after_forward = tracker, device, None
        self.peak_stage, self._peak = None, 0

    def note(self, stage: Optional[str]) -> None:
        """After `stage` (None: between stages), whether it raised MemTracker's peak."""
        peak = _on(self.tracker.get_tracker_snapshot("peak"), self.device).get("Total", 0)
        if peak > self._peak:
            self.peak_stage, self._peak = stage, peak

    def __call__(self, name: str):
        import contextlib

        marks = self

        @contextlib.contextmanager
        def stage():
            if name == "backward" and marks.after_forward is None:
                # the forward and the loss done, the logits dropped: what the graph keeps
                current = _on(marks.tracker.get_tracker_snapshot("current"), marks.device)
                marks.after_forward = current.get("Activation", 0)
            if name == "optimizer" and hasattr(marks.tracker, "_in_opt"):
                marks.tracker._in_opt = True
            marks.note(None)
            try:
                yield
            finally:
                if name == "optimizer" and hasattr(marks.tracker, "_in_opt"):
                    marks.tracker._in_opt = False
                marks.note(name)
        return stage()


def measure(run, t: int, device, step: Callable = None) -> dict:
    """The ledger of `run`'s step t: {"measured": {class: bytes}, "analytic": {...},
    "saved_after_forward": bytes, "peak_stage": name or None (the peak made between
    stages), "tracked_peak": bytes, "allocator_peak": bytes or None, "tool": TOOL};
    {"error": text} when MemTracker cannot be used."""
    device = torch.device(device)
    try:
        from torch.distributed._tools.mem_tracker import MemTracker
    except ImportError as e:
        return {"error": f"no MemTracker in this torch: {e}"}
    main = list(run.main or [])
    state = [x for k in ("master", "exp_avg", "exp_avg_sq") for x in (run.state.get(k) or [])]
    batch = [run.tokens, run.labels]
    tracker = MemTracker()
    tracker.track_external(run.model, *main, *state, *batch)
    marks = _Marks(tracker, device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
    with tracker, warnings.catch_warnings():
        # its gradient hook finds .grad already None where the fp32 main gradient took it
        warnings.filterwarnings("ignore", message="Expected a tensor or a traceable")
        (step or run.step)(t, marks)
    marks.note(None)  # raised after the last stage
    allocator = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
    peak = _on(tracker.get_tracker_snapshot("peak"), device)
    other = peak.get("Other", 0)
    main_bytes, state_bytes, batch_bytes = _nbytes(main), _nbytes(state), _nbytes(batch)
    measured = {
        "parameters": peak.get("Parameter", 0) + peak.get("Buffer", 0),
        "gradients": peak.get("Gradient", 0) + min(main_bytes, other),
        "optimizer_state": max(other - main_bytes - batch_bytes, 0),
        "saved_activations": peak.get("Activation", 0),
        "temporaries": peak.get("Temp", 0) + peak.get("Optstate", 0),
        "workspace": None if allocator is None else allocator - peak.get("Total", 0),
    }
    return {"measured": measured, "analytic": analytic(run, device),
            "saved_after_forward": marks.after_forward, "peak_stage": marks.peak_stage,
            "tracked_peak": peak.get("Total", 0),
            "allocator_peak": allocator, "batch_bytes": batch_bytes, "tool": TOOL}
