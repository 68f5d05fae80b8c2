"""What an item's checks can conclude: its verdict, the kind of a failure, and the
determinism of its outputs over repeated calls.

String enums, so that a value read back from a results file (a plain string) compares
equal to its member and `Verdict(value)` turns either into the member. No torch here:
the report and the results store read these without loading a device library.
"""

from __future__ import annotations

import enum


class Verdict(enum.StrEnum):
    PASS = "pass"
    FAIL = "fail"
    ERROR = "error"  # the implementation raised, its worker died, or the harness failed
    UNSUPPORTED = "unsupported"  # outside the implementation's declared features
    TIMEOUT = "timeout"  # outlived the item timeout; its worker was killed
    # beyond the bound where the case's yardstick is weaker than it, with the yardstick's
    # own output bit for bit: a declared outcome, listed apart, never a pass (whatever the
    # implementation's name) nor a failure (suite/verdicts.py)
    WEAK_YARDSTICK = "weak_yardstick"

    @property
    def bad(self) -> bool:
        """A verdict that makes a run exit 1 (the implementation did something wrong)."""
        return self in BAD_VERDICTS

    @property
    def compared(self) -> bool:
        """The outputs were compared with the golden (pass, fail or weak yardstick; not
        error, unsupported or timeout)."""
        return self in (Verdict.PASS, Verdict.FAIL, Verdict.WEAK_YARDSTICK)


BAD_VERDICTS = frozenset({Verdict.FAIL, Verdict.ERROR, Verdict.TIMEOUT})


class FailureKind(enum.StrEnum):
    MISMATCH = "mismatch"
    UNWRITTEN = "unwritten output"
    REPLACED = "output replaced"  # a new tensor put into `out`, the given one not written
    # a two-phase call returned a tensor it had returned before (computed once, not each call)
    STALE = "stale output"
    NONFINITE = "non-finite output"
    INPUT_MODIFIED = "input modified"
    NONDETERMINISTIC = "nondeterministic"
    EXCEPTION = "exception"
    WORKER_DIED = "worker died"  # signal, exit or lost CUDA context of the worker process
    TIMEOUT = "timeout"
    # the implementation's module could not be loaded in a worker (it raised, or its worker
    # died loading it too often): its items are not run
    NOT_LOADED = "not loaded"
    # the suite itself could not judge the item: the golden or the yardstick failed, or no
    # worker process could start. Never the implementation's failure (the fuzzer does not
    # shrink it), but the run did not check the item, so it still exits 1
    HARNESS = "harness"


class Determinism(enum.StrEnum):
    """Over R calls on the same inputs (tritonbench's DeterminismResult)."""

    BITWISE = "bitwise"  # every repeat bit-for-bit equal to the first
    NONDETERMINISTIC = "nondeterministic"  # repeats differ, each within tolerance
    FAIL = "fail"  # some repeat differs beyond tolerance (or is unwritten / not finite)
    NOT_CHECKED = "not_checked"
