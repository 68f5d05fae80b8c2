"""Which GPU each worker process gets: one GPU a worker, pinned through
CUDA_VISIBLE_DEVICES, for `run`'s worker pool (suite/workers.py) and pytest-xdist's
workers (conftest.py).

GPUs are named by their index in the parent's view (cuda:0, cuda:1, ... as torch there
sees them); a worker is pinned to the parent's K-th GPU by giving it the K-th entry of the
parent's CUDA_VISIBLE_DEVICES (an index or a UUID), or K without one. Everything here but
`visible_count` is a pure function of its arguments, so it is tested without a GPU.
"""

from __future__ import annotations

from typing import Optional, Sequence

from bwd_suite.suite.errors import SuiteInputError


def visible_count() -> int:
    """GPUs this process sees. Through NVML where it can: this does not start CUDA, so a
    CUDA_VISIBLE_DEVICES set afterwards (for this process or a child) still applies."""
    import torch

    return torch.cuda.device_count()


def physical_id(index: int, cuda_visible: Optional[str]) -> str:
    """CUDA_VISIBLE_DEVICES for a worker pinned to its parent's GPU `index`, given the
    parent's CUDA_VISIBLE_DEVICES (None: unset)."""
    if not cuda_visible:
        return str(index)
    ids = [s.strip() for s in cuda_visible.split(",")]
    if not 0 <= index < len(ids):
        raise ValueError(f"GPU {index} is not one of the {len(ids)} in "
                         f"CUDA_VISIBLE_DEVICES={cuda_visible}")
    return ids[index]


def parse_gpus(text: str, flag: str = "--gpus") -> tuple:
    """`--gpus 0,1,...`: distinct non-negative GPU indices, in the order given."""
    words = [w.strip() for w in text.split(",")]
    if not all(w.isdigit() for w in words):
        raise SuiteInputError(flag, f"{text!r} is not a comma-separated list of GPU indices "
                                    f"(e.g. 0,1)")
    gpus = tuple(int(w) for w in words)
    repeated = sorted({g for g in gpus if gpus.count(g) > 1})
    if repeated:
        raise SuiteInputError(flag, f"GPU {repeated[0]} is named twice in {text!r} (two workers "
                                    f"on one GPU: --share-gpus with --workers)")
    return gpus


def check_visible(gpus: Sequence[int], count: int, flag: str = "--gpus") -> None:
    """Every chosen GPU is one this process sees."""
    missing = [g for g in gpus if g >= count]
    if missing:
        seen = f"0-{count - 1}" if count > 1 else ("0" if count else "none")
        raise SuiteInputError(flag, f"GPU {missing[0]} is not visible here (visible: {seen})")


def assign(workers: int, gpus: Sequence[int], share: bool) -> tuple:
    """The GPU of each worker slot: slot k takes gpus[k mod len(gpus)]. More workers than
    GPUs would put two on one GPU: refused unless `share` (correctness runs only)."""
    if workers > len(gpus) and not share:
        raise SuiteInputError("--workers", f"{workers} workers on {len(gpus)} GPU"
                                           f"{'s' * (len(gpus) != 1)} would share a GPU: use "
                                           f"at most {len(gpus)}, or add --share-gpus "
                                           f"--no-timing (correctness only)")
    return tuple(gpus[k % len(gpus)] for k in range(workers))


def xdist_gpu(worker_id: str, count: int, cuda_visible: Optional[str]) -> Optional[str]:
    """CUDA_VISIBLE_DEVICES for pytest-xdist worker `gwK` on a machine of `count` GPUs: the
    parent's GPU K mod count, so that `-n <GPUs>` puts one worker on each; None for
    anything else (not a gwK worker, one GPU or none)."""
    if count < 2 or not worker_id.startswith("gw") or not worker_id[2:].isdigit():
        return None
    return physical_id(int(worker_id[2:]) % count, cuda_visible)
