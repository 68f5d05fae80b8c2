"""The pytest plugin (bwd_suite/plugin.py): its options are checked once, before collection, as one
usage error (exit 4); a failing item says what failed, the diagnosis, and how to rerun it
alone."""

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bwd_suite.suite import registry

ROOT = Path(__file__).resolve().parents[2]
ITEM = "causal_conv1d/bias/B2-D40-L100-K4-bf16-cl-nobias-silu-init"
WRONG = "causal_conv1d=tests.helpers:doubles_dx"


def _pytest(*args, xdist=False):
    plugins = [] if xdist else ["-p", "no:xdist"]
    # pytest prints whole failure messages in its short summary when it sees a CI variable
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "BUILD_NUMBER")}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        *plugins, *args], cwd=ROOT, capture_output=True, text=True,
                       timeout=300, env=env)
    return r.returncode, r.stdout + r.stderr


@pytest.mark.parametrize("args, message", [
    (["--suite-op", "layer_nrom"],
     "--suite-op: 'layer_nrom' is not one of: adamw, attention, causal_conv1d"),
    (["--suite-profile", "weekly"], "--suite-profile: 'weekly' is not one of: ci"),
    (["--suite-impl", "torch_reff"], "--suite-impl: 'torch_reff' is not one of:"),
    (["--suite-impl", "tests.helpers:raising"],
     "'tests.helpers:raising' does not say which op it implements: write "
     f"OP=tests.helpers:raising (ops: {', '.join(sorted(registry.ops()))}) "
     "or give --suite-op"),
    (["--suite-impl", "softmax=tests.helpers:layer_norm_only"],
     "registered as an implementation of layer_norm, not softmax"),
    (["--suite-repeats", "0"], "--suite-repeats: must be at least 1, got 0"),
    (["--suite-device", "bogus"], "--suite-device: 'bogus' is not a torch device"),
    (["--suite-shard", "3/2"], "--suite-shard: '3/2': the shards of 2 are numbered"),
], ids=["op", "profile", "impl", "impl-without-op", "impl-of-another-op", "repeats",
        "device", "shard"])
def test_bad_option_is_one_usage_error(args, message):
    code, out = _pytest("cases", *args)
    assert code == 4, out[-2000:]
    assert out.count(message) == 1, out[-2000:]
    assert "Traceback" not in out and "passed" not in out


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_device_without_cuda_is_a_usage_error():
    code, out = _pytest("cases", "--suite-device", "cuda")
    assert code == 4, out[-2000:]
    assert out.count("--suite-device: 'cuda': CUDA is not available") == 1, out[-2000:]
    assert "Traceback" not in out


def test_bad_option_under_xdist_is_one_usage_error():
    pytest.importorskip("xdist")
    code, out = _pytest("cases", "-n", "2", "--suite-op", "layer_nrom", xdist=True)
    assert code == 4, out[-2000:]
    assert out.count("'layer_nrom' is not one of") == 1, out[-2000:]


def _command(out: str, label: str) -> list:
    line = next(line for line in out.splitlines() if line.strip().startswith(label))
    return shlex.split(line.split(label, 1)[1])


@pytest.fixture(scope="module")
def failure():
    """One failing item (dx doubled), selected with -k, and its failure report."""
    code, out = _pytest("cases/causal_conv1d/basic.toml", "--suite-impl", WRONG,
                        "--suite-device", "cpu", "-k", ITEM)
    assert code == 1 and "1 failed" in out, out[-3000:]
    return out


def test_failure_shows_the_diagnosis(failure):
    assert "fail: dx mismatch" in failure
    report = failure.split("= FAILURES =", 1)[1].split("short test summary", 1)[0]
    diagnosis = [line for line in report.splitlines() if line.strip().startswith("diagnosis:")]
    assert len(diagnosis) == 1 and "likely" in diagnosis[0], failure[-3000:]


def test_failure_names_a_pytest_command_that_reruns_it_alone(failure):
    words = _command(failure, "rerun it alone:")
    nodeid = f"cases/causal_conv1d/basic.toml::{ITEM}[tests.helpers:doubles_dx]"
    assert words[:4] == ["python", "-m", "pytest", nodeid], words
    assert words[4:] == ["--suite-impl", WRONG, "--suite-device", "cpu"], words
    code, out = _pytest(*words[3:])  # no -k: the node id alone selects it
    assert code == 1, out[-3000:]
    assert "1 failed" in out and "deselected" not in out, out[-3000:]
    assert f"FAILED {nodeid}" in out


def test_failure_names_the_equivalent_suite_run(failure):
    from bwd_suite.cli import build_parser
    from bwd_suite.suite.selection import select

    words = _command(failure, "or:")
    assert words[:4] == ["python", "-m", "bwd_suite", "run"], words
    args = build_parser().parse_args(words[3:])
    # the whole id and $ (no longer --op and a substring: suite/reproduce.py builds it for
    # every output), the item's 2 repeats and no timing, as pytest checked it
    assert (args.profile, args.impl, args.case, args.device, args.repeats, args.no_timing) \
        == ("ci", WRONG, [ITEM + "$"], "cpu", 2, True)
    plan = select(args).plan
    assert [e.case.id for e in plan] == [ITEM]
    assert [(i.name, i.origin) for e in plan for i in e.impls] == \
        [("tests.helpers:doubles_dx", WRONG)]


def test_xdist_workers_take_one_gpu_each(monkeypatch):
    """gwK gets CUDA_VISIBLE_DEVICES of GPU K mod the GPU count in its environment, before
    it starts; nothing on one GPU, with --suite-device, or where its --tx spec sets it."""
    import types

    import execnet

    from bwd_suite import plugin as conftest
    from bwd_suite.suite import gpus

    def specs(*env):
        out = []
        for k, e in enumerate(env):
            spec = execnet.XSpec("popen" + e)
            spec.id = f"gw{k}"
            out.append(spec)
        return out

    def pinned(specs, count, device=None):
        monkeypatch.setattr(gpus, "visible_count", lambda: count)
        config = types.SimpleNamespace(getoption=lambda name: device)
        conftest.pytest_xdist_setupnodes(config, specs)
        return [s.env.get("CUDA_VISIBLE_DEVICES") for s in specs]

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert pinned(specs("", "", "", "", ""), 4) == ["0", "1", "2", "3", "0"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "6,7")
    assert pinned(specs("", ""), 2) == ["6", "7"]
    assert pinned(specs("", "//env:CUDA_VISIBLE_DEVICES=3"), 2) == ["6", "3"]
    assert pinned(specs("", ""), 1) == [None, None]
    assert pinned(specs("", ""), 2, device="cuda:1") == [None, None]


def test_suite_shard_deselects_the_other_shards_cases():
    """The cases of --suite-shard's shard stay, each with all its implementations, split as
    `run --shard` splits them; the harness's own tests stay."""
    import types

    from bwd_suite import plugin as conftest
    from bwd_suite.suite.shard import Shard, take

    def item(op, case_id, impl):
        it = object.__new__(conftest.CaseItem)
        it.case, it.impl = types.SimpleNamespace(op=op, id=case_id), impl
        return it

    cases = [item(op, f"{op}/c{k}", impl) for op in ("softmax", "adamw") for k in range(5)
             for impl in ("a", "b")]
    other = types.SimpleNamespace(name="test_something")
    deselected = []
    config = types.SimpleNamespace(
        stash={conftest._SELECTION: types.SimpleNamespace(shard=Shard(2, 3))},
        hook=types.SimpleNamespace(pytest_deselected=lambda items: deselected.extend(items)))
    items = [other, *cases]
    conftest.pytest_collection_modifyitems(config, items)

    def key(i):
        return (i.case.op, i.case.id)

    mine = take(sorted({key(i) for i in cases}), lambda k: k, Shard(2, 3))
    assert items[0] is other and len(mine) == 3  # of 10 cases
    assert [key(i) for i in items[1:]] == [key(i) for i in cases if key(i) in mine]
    assert sorted(map(id, items[1:] + deselected)) == sorted(map(id, cases))
