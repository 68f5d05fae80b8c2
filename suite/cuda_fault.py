"""A CUDA fault that outlives its call.

Some kernel faults (misaligned address, illegal memory access, ...) are sticky: the CUDA
context of the process is lost, and every later CUDA call fails with the same error. The
item that hit it keeps the error as its verdict; every later item of the process is then
not run and gets an error naming that item, instead of a failure it did not cause (on the
H200 one misaligned-address fault in Dao's kernel used to fail every item its pytest-xdist
worker ran after it).

Whether an error was sticky is decided by probing the context after it, not by its message.
"""

from __future__ import annotations

from typing import Optional

import torch

_lost: Optional[str] = None


def _context_lost() -> bool:
    """True when this process has a CUDA context and it no longer runs a kernel."""
    if not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return False
    try:
        torch.ones(1, device="cuda").add_(1)
        torch.cuda.synchronize()
        return False
    except Exception:  # noqa: BLE001 - any failure of the probe means the context is gone
        return True


def note(exc: BaseException, where: str) -> bool:
    """After `exc` was raised at `where` (an item): True, and remembered for the rest of
    the process, if the CUDA context was lost with it."""
    global _lost
    if _lost is None and _context_lost():
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        _lost = f"{where}: {type(exc).__name__}: {first}"
    return _lost is not None


def lost_at() -> Optional[str]:
    """The item whose error lost this process's CUDA context, or None."""
    return _lost


def not_run_reason() -> str:
    return f"not run: this process's CUDA context was lost earlier, at {_lost}"


def reset() -> None:
    """Forget a loss (tests only: a real lost context does not come back)."""
    global _lost
    _lost = None
