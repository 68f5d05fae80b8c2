"""The profiles a case file tags its cases with, and where the package's case files are:
what suite/cases.py, the rerun commands (suite/reproduce.py) and the reports need to
know about them without importing the registry (and torch)."""

from __future__ import annotations

from pathlib import Path

PROFILES = ("smoke", "ci", "gpu", "perf", "nightly")
# A profile also runs the cases tagged with the profiles it includes.
# Nested: smoke < ci < gpu < nightly (perf stands apart).
PROFILE_INCLUDES = {"ci": ("smoke",), "gpu": ("smoke", "ci"), "nightly": ("smoke", "ci", "gpu")}
CASES_DIR = Path(__file__).resolve().parents[1] / "cases"
# Training-step scenarios (suite/step/) live in cases/<SCENARIOS>/, a case kind beside the
# ops' folders: op case loading passes over that folder, and their rows' op is STEP_KIND.
SCENARIOS = "scenarios"
STEP_KIND = "step"


def profile_tags(profile: str) -> frozenset:
    """The tags whose cases a profile runs: its own and those of the profiles it includes."""
    return frozenset((profile, *PROFILE_INCLUDES.get(profile, ())))
