"""User-facing errors: bad case files, unknown names, impossible combinations; and the
harness's own failures, kept apart from the implementations'.

Every such error is one line that names where the problem is (file and key, or the
name that was not found) and what is wrong. The CLI prints it and exits with code 2
before anything runs; pytest turns it into a usage error.
"""

from __future__ import annotations

import sys
from typing import Callable

EXIT_BAD_INPUT = 2


class SuiteInputError(Exception):
    """Bad input from the user: a case file, a command-line name or a combination."""

    def __init__(self, where: str, what: str):
        self.where = where
        self.what = what
        super().__init__(f"{where}: {what}")


class HarnessError(Exception):
    """The suite's own machinery failed while an implementation ran (a hook of the harness's
    around its call, such as the offload check's host copies): the verdict is the harness's
    (FailureKind.HARNESS), never the implementation's."""


def did_you_mean(name: str, known) -> str:
    """The list of known names, for an error message."""
    known = sorted(known)
    return f"{name!r} is not one of: {', '.join(known) if known else '(none)'}"


def run_script(main: Callable[[], int], prog: str) -> None:
    """Entry point of a scripts/ program: its exit status, or its bad-input error as one
    line `prog: where: what` and status 2, as the CLI does."""
    try:
        code = main()
    except SuiteInputError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        code = EXIT_BAD_INPUT
    sys.exit(code)
