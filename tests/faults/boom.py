"""A module that must never be imported because a results file names it: importing it
leaves a marker file (the path in BWD_SUITE_BOOM_MARKER), as a module downloaded with a
nightly job's results could do anything. Named on the command line (`--impl
causal_conv1d=tests.faults.boom:fn`) it is a correct causal_conv1d backward."""

import os
from pathlib import Path

from bwd_suite.kernels.causal_conv1d.tiled import backward_tiled

if os.environ.get("BWD_SUITE_BOOM_MARKER"):
    Path(os.environ["BWD_SUITE_BOOM_MARKER"]).write_text("imported\n")


def fn(**kw):
    backward_tiled(**kw)
