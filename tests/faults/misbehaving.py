"""Implementations of causal_conv1d that misbehave towards the harness rather than in their
arithmetic: each computes a correct result (the fp32 tiled model) and, on the cases with
initial states and SiLU (two of the eight bias cases of the ci profile, as
tests/crashing.py), does one thing the run must survive or catch."""

import os
import stat
import sys
import time

import torch

from bwd_suite.kernels.causal_conv1d.tiled import backward_tiled


def _doomed(kw) -> bool:
    return kw["initial_states"] is not None and kw["activation"] == "silu"


def _write_pipes(data: bytes) -> None:
    """Write into every pipe and socket this process holds open for writing: the worker's
    channel to the run among them, whichever of the two it is."""
    import fcntl

    for fd in range(3, 256):
        try:
            mode = os.fstat(fd).st_mode
            if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
                continue
            if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY:
                continue
            os.write(fd, data)
        except OSError:
            continue


def garbage(**kw):
    """Writes bytes that are not a message into the worker's pipe."""
    if _doomed(kw):
        _write_pipes(b"garbage, not a frame " * 8)
    backward_tiled(**kw)


def pickle_bomb(**kw):
    """Writes a pickle that would run a command if the run unpickled it."""
    if _doomed(kw):
        import pickle

        class Boom:
            def __reduce__(self):
                return (os.system, (f"touch {os.environ.get('BWD_SUITE_MARKER', '/dev/null')}",))

        payload = pickle.dumps(Boom())
        _write_pipes(len(payload).to_bytes(4, "big") + payload)
    backward_tiled(**kw)


def forks(**kw):
    """Forks on every call; both processes carry on as if nothing happened."""
    backward_tiled(**kw)
    if _doomed(kw):
        os.fork()


def noisy(**kw):
    """Prints a lot on stdout, a 4 MiB line on stderr, then raises on the doomed cases."""
    print("stdout line of the implementation " * 3000)
    if _doomed(kw):
        sys.stderr.write("E" * (4 << 20) + "\n")
        sys.stderr.flush()
        raise RuntimeError("deliberate failure after printing")
    backward_tiled(**kw)


def hangs_and_tells(**kw):
    """Writes its pid to $BWD_SUITE_PID_FILE and hangs on the doomed cases."""
    if _doomed(kw):
        with open(os.environ["BWD_SUITE_PID_FILE"], "w") as f:
            f.write(str(os.getpid()))
        time.sleep(3600)
    backward_tiled(**kw)


def swaps_storage(**kw):
    """Computes into a tensor of its own and gives out["dx"] that storage (`.data =`),
    never writing the buffer it was handed."""
    mine = torch.empty_like(kw["out"]["dx"])
    backward_tiled(**{**kw, "out": {**kw["out"], "dx": mine}})
    kw["out"]["dx"].data = mine


def sets_storage(**kw):
    """The same with `.set_()`."""
    mine = torch.empty_like(kw["out"]["dx"])
    backward_tiled(**{**kw, "out": {**kw["out"], "dx": mine}})
    kw["out"]["dx"].set_(mine)


def oom_and_pid(**kw):
    """Prints its process id on every call; runs out of memory on the doomed cases."""
    print(f"pid={os.getpid()}", flush=True)
    if _doomed(kw):
        raise torch.OutOfMemoryError("out of memory (deliberately)")
    backward_tiled(**kw)
