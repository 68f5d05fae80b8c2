"""The pytest plugin (entry point pytest11 `bwd_suite.plugin`): every case file of the
installed package's cases/ becomes test items, one per (case x implementation), named by
the case id: `causal_conv1d/states/B2-...[torch_ref]`. From this repository `pytest`
collects them (testpaths); from any other, `pytest --pyargs bwd_suite.cases
--suite-impl softmax=mypkg.mod:fn` (docs/pytest.md).

Options (group "bwd-suite") pick the profile, op, implementations, device and shard; they
are checked once, in pytest_configure, and a bad one is a single usage error (exit 4). An
item fails with the verdict's reason, the diagnosis and the commands that rerun it alone;
an implementation that cannot run the case (GPU-only on a CPU, an undeclared feature) is
skipped with the reason. Under pytest-xdist on a machine of several GPUs each worker is
pinned to one GPU (docs/multi-gpu.md).

Loaded in every pytest session of an environment that has the package, so it imports
torch and the registry only once our options are given or our case files collected.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
from pathlib import Path

import pytest

from bwd_suite.suite.errors import SuiteInputError

DEFAULT_REPEATS = 2
_OPTIONS = ("--suite-profile", "--suite-op", "--suite-impl", "--suite-device",
            "--suite-repeats")
# the run command's flags in messages from suite/ -> this plugin's options
_FLAGS = re.compile(r"(?<![\w-])--(op|impl)\b")


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
    g.addoption("--suite-repeats", metavar="R", type=int, default=None,
                help=f"calls per item for the determinism check (default {DEFAULT_REPEATS})")
    g.addoption("--suite-shard", metavar="I/N", default=None,
                help="only the cases of shard I of N (1 <= I <= N), split as `run --shard` "
                     "splits them; the other items are deselected")


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device; skipped on a CPU")
    config.addinivalue_line("markers", "conformance(op): an item generated from a case file")
    # checked once here when given: a bad option is one usage error (exit 4), not one per
    # case file or a traceback per item; without them, at the first case file
    if any(config.getoption(name) is not None for name in _OPTIONS + ("--suite-shard",)):
        _selection(config)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_setupnodes(config, specs):
    """pytest-xdist on a machine of several GPUs: worker gwK gets CUDA_VISIBLE_DEVICES of
    GPU K mod the GPU count in its environment, set before the worker process imports
    anything, so `-n <GPUs>` puts one worker on each and each sees its GPU as cuda:0. Not
    with --suite-device (every worker on that device), nor for a --tx spec that sets the
    variable itself."""
    from bwd_suite.suite.gpus import visible_count, xdist_gpu

    if config.getoption("--suite-device") is not None:
        return
    count, visible = visible_count(), os.environ.get("CUDA_VISIBLE_DEVICES")
    for spec in specs:
        gpu = xdist_gpu(spec.id or "", count, visible)
        if gpu is not None and "CUDA_VISIBLE_DEVICES" not in spec.env:
            spec.env["CUDA_VISIBLE_DEVICES"] = gpu


def _usage_error(e: SuiteInputError) -> pytest.UsageError:
    """A suite input error as pytest's usage error, naming this plugin's options."""
    return pytest.UsageError(_FLAGS.sub(r"--suite-\1", str(e)))


class _Selection:
    """The plugin's options, parsed and checked once per session."""

    def __init__(self, config):
        import torch

        from bwd_suite.suite import cases as cases_mod
        from bwd_suite.suite import registry
        from bwd_suite.suite.selection import impl_names, implementations_by_op, parse_device
        from bwd_suite.suite.shard import parse_shard

        # suite/launches.py asks kineto to tear CUPTI down when its profiler stops, for the
        # timed calls of a run that follow; a pytest process that counted launches then
        # hung at exit on the H200. Items time nothing after a count.
        os.environ.setdefault("TEARDOWN_CUPTI", "0")
        if hasattr(config, "workerinput") and not torch.cuda.is_available():
            # one xdist worker per core: intra-op threads would oversubscribe the CPU, and
            # small float64 depthwise convolutions run many times slower with them
            torch.set_num_threads(1)

        given = {name: config.getoption(name) for name in _OPTIONS}
        self.given = {k: v for k, v in given.items() if v is not None}
        self.repeats = given["--suite-repeats"]
        self.op = given["--suite-op"]
        self.impl_names = impl_names(given["--suite-impl"])
        try:
            if self.repeats is not None and self.repeats < 1:
                raise SuiteInputError("--suite-repeats", f"must be at least 1, got {self.repeats}")
            self.device = parse_device(given["--suite-device"], "--suite-device")
            shard = config.getoption("--suite-shard")
            self.shard = parse_shard(shard, "--suite-shard") if shard is not None else None
            self.profile = cases_mod.profile_names(
                given["--suite-profile"] or ("gpu" if self.device.type == "cuda" else "ci"),
                "--suite-profile")
            if self.op:
                registry.op(self.op, where="--suite-op")
            # op -> implementations, every --suite-impl name resolved here, once; without
            # the option, at the first case file (a run of tests/ alone imports no kernel)
            self.impls = implementations_by_op(self.impl_names, default_op=self.op) \
                if self.impl_names else None
        except SuiteInputError as e:
            raise _usage_error(e) from None
        self.repeats = self.repeats or DEFAULT_REPEATS

    def implementations(self, op_name: str) -> list:
        """The implementations that make items of `op_name`'s cases."""
        from bwd_suite.suite import registry

        if self.impls is None:
            self.impls = {o: registry.select_implementations(o, None) for o in registry.ops()}
        return self.impls[op_name]


_SELECTION = pytest.StashKey[_Selection]()


def _selection(config) -> _Selection:
    if _SELECTION not in config.stash:
        config.stash[_SELECTION] = _Selection(config)
    return config.stash[_SELECTION]


@functools.lru_cache(maxsize=1)
def _cases_dir() -> Path:
    """The package's case files (bwd_suite/cases installed, cases/ in a checkout), found
    without importing the suite."""
    import importlib.util

    return Path(importlib.util.find_spec("bwd_suite.cases").submodule_search_locations[0]
                ).resolve()


def pytest_collect_file(file_path: Path, parent):
    # cases/scenarios/ holds training-step scenarios, run by `python -m bwd_suite step`
    if file_path.suffix == ".toml" and _cases_dir() in file_path.resolve().parents \
            and (_cases_dir() / "scenarios") not in file_path.resolve().parents:
        return CaseFile.from_parent(parent, path=file_path)
    return None


def pytest_collection_modifyitems(config, items):
    """--suite-shard: deselect the conformance items of the other shards' cases (the
    harness's own tests stay)."""
    from bwd_suite.suite.shard import case_key, take

    cases = [i for i in items if isinstance(i, CaseItem)]
    if not cases or _selection(config).shard is None:
        return
    shard = _selection(config).shard
    kept = {id(i) for i in take(cases, lambda i: case_key(i.case), shard)}
    dropped = [i for i in cases if id(i) not in kept]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        gone = {id(i) for i in dropped}
        items[:] = [i for i in items if id(i) not in gone]


class CaseFile(pytest.File):
    def collect(self):
        from bwd_suite.suite import cases as cases_mod

        sel = _selection(self.config)
        cases = cases_mod.load_file(self.path, cases_mod.CASES_DIR.parent, sel.profile)
        for case in cases:
            if not case.in_profile(sel.profile) or (sel.op and case.op != sel.op):
                continue
            for impl in sel.implementations(case.op):
                item = CaseItem.from_parent(self, name=f"{case.id}[{impl.name}]",
                                            case=case, impl=impl)
                item.add_marker(pytest.mark.conformance(case.op))
                if "cpu" not in impl.devices:
                    item.add_marker(pytest.mark.gpu)
                known = impl.known_failure(case.id, sel.device.type, case.params)
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
        from bwd_suite.suite.driver import Driver
        from bwd_suite.suite.runner import RunOptions

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
        from bwd_suite.suite import cuda_fault, registry
        from bwd_suite.suite.outcomes import Verdict
        from bwd_suite.suite.plan import Plan

        row, = _driver(self.config).rows(Plan.single(registry.op(self.case.op), self.case,
                                                     self.impl))
        self.user_properties.append(("verdict", row.verdict.value))
        if row.verdict is Verdict.UNSUPPORTED:
            pytest.skip(f"unsupported: {row.reason}")
        if cuda_fault.lost_at() and row.reason == cuda_fault.not_run_reason():
            # not run after an earlier item's fault: say which, not a CUDA error here
            pytest.fail(row.reason, pytrace=False)
        if row.verdict is Verdict.WEAK_YARDSTICK:  # declared by the harness, listed apart
            pytest.xfail(f"as weak as the yardstick: {row.reason}")
        if row.verdict is not Verdict.PASS:
            raise VerdictFailure(row)

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, VerdictFailure):
            r = excinfo.value.row
            diagnosis = f"  diagnosis: {r.diagnosis}\n" if r.diagnosis else ""
            return (f"{r.verdict}: {r.reason}\n{diagnosis}"
                    f"  case {self.case.id} ({self.case.file}), seed {self.case.seed}\n"
                    f"  params {dict(self.case.params)}\n"
                    f"  rerun it alone: {self.rerun_pytest()}\n"
                    f"              or: {self.rerun_suite(r)}")
        return super().repr_failure(excinfo)

    def _impl_ref(self) -> str:
        return self.impl.origin or self.impl.name

    def _location(self) -> str:
        """The item as an argument that finds it from where pytest was started: its case
        file's path relative to that folder (the node id, in a checkout), else absolute
        (the case files of an installed package, collected from another repository with
        --pyargs, whose node ids are relative to the package's cases/)."""
        start = self.config.invocation_params.dir
        path = self.path.relative_to(start) if self.path.is_relative_to(start) else self.path
        return f"{path.as_posix()}::{self.name}"

    def rerun_pytest(self) -> str:
        """The pytest command that collects this item alone, with the options that chose
        it, from the folder where this session started."""
        sel = _selection(self.config)
        options = {**sel.given, "--suite-impl": self._impl_ref()}
        words = ["python", "-m", "pytest", self._location()]
        for name, value in options.items():
            words += [name, str(value)]
        return shlex.join(words)

    def rerun_suite(self, row) -> str:
        """The same item through `python -m bwd_suite run` (suite/reproduce.py, as every
        output of the suite): its row, with what an item's row does not record: the
        session's profile, its device where --suite-device chose one (else run picks as
        the plugin did), and its case file as the package's."""
        from bwd_suite.suite.reproduce import rerun_command

        sel = _selection(self.config)
        device = str(sel.device) if "--suite-device" in sel.given else ""
        return rerun_command(row, profile=sel.profile, device=device,
                             case_file=self.path.resolve().relative_to(_cases_dir()).as_posix())

    def reportinfo(self):
        return self.path, None, f"{self.case.id}[{self.impl.name}]"
