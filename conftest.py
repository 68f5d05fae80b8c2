"""pytest entry: every case file under cases/ becomes test items, one per
(case x implementation), named by the case id: `causal_conv1d/states/B2-...[torch_ref]`.

Options (group "bwd-suite") pick the profile, op, implementations and device. An item
fails with the verdict's reason; an implementation that cannot run the case (GPU-only on
a CPU, an undeclared feature) is skipped with the reason.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from suite import cases as cases_mod
from suite import registry
from suite.errors import SuiteInputError


def pytest_addoption(parser):
    g = parser.getgroup("bwd-suite", "conformance items from the case files")
    g.addoption("--suite-profile", metavar="NAME", default=None,
                help="profile of cases to collect: smoke, ci, gpu, perf, nightly "
                     "(default: ci on a CPU, gpu with CUDA)")
    g.addoption("--suite-op", metavar="OP", default=None, help="only this op")
    g.addoption("--suite-impl", metavar="NAMES", default=None,
                help="comma-separated implementations (default: all non-mutants)")
    g.addoption("--suite-device", metavar="DEV", default=None,
                help="torch device for the items (default: cuda when available, else cpu)")
    g.addoption("--suite-repeats", metavar="R", type=int, default=2,
                help="calls per item for the determinism check (default 2)")


def pytest_configure(config):
    if hasattr(config, "workerinput") and not torch.cuda.is_available():
        # one xdist worker per core: intra-op threads would oversubscribe the CPU, and
        # small float64 depthwise convolutions run many times slower with them
        torch.set_num_threads(1)
    config.addinivalue_line("markers", "gpu: needs a CUDA device; skipped on a CPU")
    config.addinivalue_line("markers", "conformance(op): an item generated from a case file")


class _Selection:
    """Options parsed once per session; bad names become a usage error."""

    def __init__(self, config):
        dev = config.getoption("--suite-device") or (
            "cuda" if torch.cuda.is_available() else "cpu")
        self.device = torch.device(dev)
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", 0)
        self.profile = config.getoption("--suite-profile") or (
            "gpu" if self.device.type == "cuda" else "ci")
        self.op = config.getoption("--suite-op")
        impl = config.getoption("--suite-impl")
        self.impl_names = [n.strip() for n in impl.split(",")] if impl else None
        self.repeats = config.getoption("--suite-repeats")
        try:
            cases_mod.profile_names(self.profile, "--suite-profile")
            if self.op:
                registry.op(self.op, where="--suite-op")
            for op_name in registry.ops():
                registry.select_implementations(op_name, self.impl_names)
        except SuiteInputError as e:
            raise pytest.UsageError(str(e)) from None


_SELECTION = pytest.StashKey[_Selection]()


def _selection(config) -> _Selection:
    if _SELECTION not in config.stash:
        config.stash[_SELECTION] = _Selection(config)
    return config.stash[_SELECTION]


def pytest_collect_file(file_path: Path, parent):
    if file_path.suffix == ".toml" and cases_mod.CASES_DIR in file_path.parents:
        return CaseFile.from_parent(parent, path=file_path)
    return None


class CaseFile(pytest.File):
    def collect(self):
        sel = _selection(self.config)
        try:
            cases = cases_mod.load_file(self.path, cases_mod.CASES_DIR.parent)
        except SuiteInputError:
            raise
        for case in cases:
            if not case.in_profile(sel.profile) or (sel.op and case.op != sel.op):
                continue
            for impl in registry.select_implementations(case.op, sel.impl_names):
                item = CaseItem.from_parent(self, name=f"{case.id}[{impl.name}]",
                                            case=case, impl=impl)
                item.add_marker(pytest.mark.conformance(case.op))
                if "cpu" not in impl.devices:
                    item.add_marker(pytest.mark.gpu)
                known = impl.known_failure(case.id)
                if known:
                    item.add_marker(pytest.mark.xfail(reason=f"known failure: {known}",
                                                      raises=VerdictFailure, strict=True))
                yield item

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, SuiteInputError):
            return f"bad case file: {excinfo.value}"
        return super().repr_failure(excinfo)


class VerdictFailure(Exception):
    def __init__(self, row):
        self.row = row
        super().__init__(row.reason)


_DRIVER = pytest.StashKey["Driver"]()


def _driver(config):
    """One driver for the session: items of one case, collected one after another, share
    the case's inputs and golden through it."""
    if _DRIVER not in config.stash:
        from suite.driver import Driver
        from suite.runner import RunOptions

        sel = _selection(config)
        config.stash[_DRIVER] = Driver(RunOptions(device=sel.device, golden_device=sel.device,
                                                  repeats=sel.repeats, timing=False))
    return config.stash[_DRIVER]


class CaseItem(pytest.Item):
    def __init__(self, *, case, impl, **kw):
        super().__init__(**kw)
        self.case = case
        self.impl = impl

    def runtest(self):
        from suite import cuda_fault
        from suite.outcomes import Verdict
        from suite.plan import Plan

        row, = _driver(self.config).rows(Plan.single(registry.op(self.case.op), self.case,
                                                     self.impl))
        self.user_properties.append(("verdict", row.verdict.value))
        if row.verdict is Verdict.UNSUPPORTED:
            pytest.skip(f"unsupported: {row.reason}")
        if cuda_fault.lost_at() and row.reason == cuda_fault.not_run_reason():
            # not run after an earlier item's fault: say which, not a CUDA error here
            pytest.fail(row.reason, pytrace=False)
        if row.verdict is not Verdict.PASS:
            raise VerdictFailure(row)

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, VerdictFailure):
            r = excinfo.value.row
            return (f"{r.verdict}: {r.reason}\n"
                    f"  case {self.case.id} ({self.case.file}), seed {self.case.seed}\n"
                    f"  params {dict(self.case.params)}")
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, None, f"{self.case.id}[{self.impl.name}]"
