"""A module that crashes the process importing it (`BWD_SUITE_FAULT`: segfault or exit),
as a broken extension can: the run must report it, not die silently."""

import ctypes
import os

if os.environ.get("BWD_SUITE_FAULT") == "exit":
    os._exit(0)
ctypes.string_at(0)


def fn(**kw):
    raise AssertionError("never reached")
