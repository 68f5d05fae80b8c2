"""A module that loads in the run's process and fails to load in a worker process, the
way a module does that reads a device, a file or an environment only a worker has.
`BWD_SUITE_FAULT=raise` raises there, `segfault` dies by SIGSEGV, `exit` calls os._exit;
anywhere else (and in the run's process) `fn` is a correct causal_conv1d backward."""

import ctypes
import multiprocessing
import os

from bwd_suite.kernels.causal_conv1d.tiled import backward_tiled

if multiprocessing.current_process().name.startswith("bwd-suite-worker"):
    how = os.environ.get("BWD_SUITE_FAULT", "raise")
    if how == "segfault":
        ctypes.string_at(0)
    elif how == "exit":
        os._exit(4)
    else:
        raise ImportError("no such device in this process (deliberately)")


def fn(**kw):
    backward_tiled(**kw)
