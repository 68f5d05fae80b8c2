"""The package map: the repository's top-level folders installed under one name of our own,
`bwd_suite` (bwd_suite/__init__.py says why). Metadata lives in pyproject.toml."""

from setuptools import find_packages, setup

FOLDERS = ("suite", "ops", "golden", "kernels", "reports", "cases")

packages, package_dir = ["bwd_suite"], {"bwd_suite": "bwd_suite"}
for folder in FOLDERS:
    package_dir[f"bwd_suite.{folder}"] = folder
    packages += [f"bwd_suite.{folder}"] + [f"bwd_suite.{folder}.{p}"
                                          for p in find_packages(folder)]

setup(packages=packages, package_dir=package_dir)
