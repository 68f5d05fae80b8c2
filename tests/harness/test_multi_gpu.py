"""Several GPUs and several machines, checked on a CPU: which GPU each worker gets
(suite/gpus.py), the checks of --gpus, --share-gpus and --shard, the shard split
(suite/shard.py), and the shards of a run read back by report and compare as the one
run they split."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

from bwd_suite.suite import gpus, results
from bwd_suite.cli import build_parser, main
from bwd_suite.suite.errors import SuiteInputError
from bwd_suite.suite.plan import Plan
from bwd_suite.suite.selection import select
from bwd_suite.suite.shard import Shard, case_key, parse_shard, split_plan, take

ROOT = Path(__file__).resolve().parents[2]


def _args(*argv):
    return build_parser().parse_args(["run", *argv])


# -- which GPU a worker gets ---------------------------------------------------------------

def test_a_worker_is_pinned_to_its_parents_gpu():
    assert gpus.physical_id(1, None) == "1"
    assert gpus.physical_id(1, "4,6") == "6"  # the parent's cuda:1 is physical GPU 6
    assert gpus.physical_id(0, "GPU-aa, GPU-bb") == "GPU-aa"
    with pytest.raises(ValueError):
        gpus.physical_id(2, "4,6")


def test_xdist_worker_k_gets_gpu_k_mod_count():
    assert [gpus.xdist_gpu(f"gw{k}", 2, None) for k in range(4)] == ["0", "1", "0", "1"]
    assert gpus.xdist_gpu("gw5", 4, "3,2,1,0") == "2"
    assert gpus.xdist_gpu("gw1", 1, None) is None  # one GPU: nothing to choose
    assert gpus.xdist_gpu("gw1", 0, None) is None  # a CPU
    assert gpus.xdist_gpu("master", 2, None) is None


def test_workers_share_a_gpu_only_when_asked():
    assert gpus.assign(2, (0, 1), share=False) == (0, 1)
    assert gpus.assign(1, (3, 1), share=False) == (3,)
    assert gpus.assign(3, (0, 1), share=True) == (0, 1, 0)
    with pytest.raises(SuiteInputError) as e:
        gpus.assign(3, (0, 1), share=False)
    assert e.value.where == "--workers" and "--share-gpus" in str(e.value)


@pytest.fixture
def four_gpus(monkeypatch):
    """A machine of four GPUs, as far as the choice of GPUs goes."""
    monkeypatch.setattr(gpus, "visible_count", lambda: 4)
    return torch.device("cuda", 0)


def _pool(device, *argv, tmp_path=Path("/nonexistent")):
    from bwd_suite.suite.commands.run import pool_options

    pool = pool_options(_args(*argv), device, "gpu", tmp_path)
    return None if pool is None else pool.devices[:pool.workers]


def test_run_puts_one_worker_on_each_gpu(four_gpus):
    assert _pool(four_gpus) == ("cuda:0", "cuda:1", "cuda:2", "cuda:3")
    assert _pool(torch.device("cuda", 2)) == ("cuda:2", "cuda:3", "cuda:0", "cuda:1")
    assert _pool(four_gpus, "--gpus", "3,1") == ("cuda:3", "cuda:1")
    assert _pool(four_gpus, "--workers", "2") == ("cuda:0", "cuda:1")
    assert _pool(four_gpus, "--gpus", "1", "--workers", "3", "--share-gpus",
                 "--no-timing") == ("cuda:1",) * 3
    assert _pool(four_gpus, "--workers", "0") is None
    with pytest.raises(SuiteInputError, match="5 workers on 4 GPUs would share"):
        _pool(four_gpus, "--workers", "5")
    with pytest.raises(SuiteInputError, match="--gpus: GPU 4 is not visible here"):
        _pool(four_gpus, "--gpus", "0,4")


def test_the_runs_device_is_one_of_its_gpus(four_gpus):
    from bwd_suite.suite.commands.run import gpus_device

    assert gpus_device(_args("--gpus", "2,3"), four_gpus) == torch.device("cuda", 2)
    args = _args("--gpus", "2,3", "--device", "cuda:3")
    assert gpus_device(args, torch.device("cuda", 3)) == torch.device("cuda", 3)
    with pytest.raises(SuiteInputError, match="--gpus: 2,3 leaves out the run's --device"):
        gpus_device(_args("--gpus", "2,3", "--device", "cuda:1"), torch.device("cuda", 1))


def test_a_pool_worker_sees_only_its_gpu(tmp_path, monkeypatch):
    from bwd_suite.suite.runner import RunOptions
    from bwd_suite.suite.workers import Pool, PoolOptions

    opts = RunOptions(device=torch.device("cuda", 2), golden_device=torch.device("cuda", 2))
    pool = Pool(opts, None, None, PoolOptions(workers=2, devices=("cuda:2", "cuda:0"),
                                              log_dir=tmp_path))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6")
    first, second = pool._setup(0), pool._setup(1)
    assert (first.cuda_visible, second.cuda_visible) == ("6", "4")
    assert first.opts.device == torch.device("cuda", 0)  # its one GPU
    assert first.opts.golden_device == torch.device("cuda", 0)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert pool._setup(0).cuda_visible == "2"


SMALL = ["--profile", "ci", "--case", "causal_conv1d/bias/", "--repeats", "1", "--quiet",
         "--device", "cpu"]


@pytest.mark.parametrize("argv, flag", [
    (["--gpus", "0,0"], "--gpus"),
    (["--gpus", "x"], "--gpus"),
    (["--gpus", "-1"], "--gpus"),
    (["--gpus", "0"], "--gpus"),  # the run is on the CPU
    (["--gpus", "0", "--workers", "0", "--no-timing"], "--gpus"),
    (["--share-gpus"], "--share-gpus"),  # timings must not share a GPU
    (["--shard", "3/2"], "--shard"),
    (["--shard", "1of2"], "--shard"),
])
def test_bad_gpu_and_shard_options_exit_2_with_one_line(argv, flag, capsys, tmp_path):
    assert main(["run", *SMALL, *argv, "--output", str(tmp_path / "r.parquet")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {flag}: "), err
    assert not (tmp_path / "r.parquet").exists()


# -- the shard split ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def ci_plan():
    return select(_args("--profile", "ci", "--device", "cpu")).plan


def _keys(plan) -> list:
    return [(case_key(e.case), i.name) for e in plan for i in e.impls]


@pytest.mark.parametrize("n", [1, 2, 3, 7])
def test_shards_are_a_balanced_partition_of_the_items(ci_plan, n):
    shards = [split_plan(ci_plan, Shard(i, n)) for i in range(1, n + 1)]
    every = [k for s in shards for k in _keys(s)]
    assert sorted(every) == sorted(_keys(ci_plan))  # each item exactly once
    cases = [s.n_cases for s in shards]
    assert max(cases) - min(cases) <= 1
    # per op the case counts differ by one at most: the items by one case's worth per op
    per_op = {e.spec.name: len(e.impls) for e in ci_plan}
    items = [s.n_items for s in shards]
    assert max(items) - min(items) <= sum(per_op.values())
    for s in shards:  # a case's items stay together: its golden is built on one machine
        assert all(len(e.impls) == per_op[e.spec.name] for e in s)


def test_shards_depend_on_the_selection_only(ci_plan):
    """Not on the order the cases came in, nor on the process: the same twice, the same
    for the cases reversed, the same under another PYTHONHASHSEED."""
    shard = Shard(2, 3)
    once = _keys(split_plan(ci_plan, shard))
    assert once == _keys(split_plan(ci_plan, shard))
    reversed_plan = Plan(tuple(reversed(ci_plan.entries)))
    assert sorted(_keys(split_plan(reversed_plan, shard))) == sorted(once)

    keys = sorted({case_key(e.case) for e in ci_plan})
    here = take(keys, lambda k: k, shard)
    code = ("import json, sys; from bwd_suite.suite.shard import Shard, take; "
            "keys = [tuple(k) for k in json.load(sys.stdin)]; "
            "print(json.dumps(take(reversed(keys), lambda k: k, Shard(2, 3))))")
    for seed in ("1", "2"):
        out = subprocess.run([sys.executable, "-c", code], input=json.dumps(keys), cwd=ROOT,
                             capture_output=True, text=True, timeout=60, check=True,
                             env={**os.environ, "PYTHONHASHSEED": seed}).stdout
        assert sorted(map(tuple, json.loads(out))) == sorted(here)


@pytest.mark.parametrize("text", ["0/2", "3/2", "1/0", "2", "a/b", "1/2/3", "-1/2", ""])
def test_a_bad_shard_is_refused(text):
    with pytest.raises(SuiteInputError) as e:
        parse_shard(text)
    assert e.value.where == "--shard"


def test_an_empty_shard_is_refused(ci_plan):
    one_case = Plan(ci_plan.entries[:1])
    assert split_plan(one_case, Shard(1, 2)).n_cases == 1
    with pytest.raises(SuiteInputError, match="shard 2/2 holds no case"):
        split_plan(one_case, Shard(2, 2))


# -- shards and workers give the run they split --------------------------------------------

RUN = [*SMALL, "--no-timing", "--impl", "torch_ref,causal_conv1d=tests.helpers:doubles_dx"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The bias cases with a right and a wrong implementation (8 of 16 items fail): with
    one worker, with two workers on the one device, and as two shards (in this process)."""
    folder = tmp_path_factory.mktemp("shards")
    argv = {"one": ["--workers", "1"], "two": ["--workers", "2", "--share-gpus"],
            "s1": ["--shard", "1/2", "--workers", "0"],
            "s2": ["--shard", "2/2", "--workers", "0"]}
    paths = {}
    for name, extra in argv.items():
        paths[name] = folder / f"{name}.parquet"
        assert main(["run", *RUN, *extra, "--output", str(paths[name])]) == 1
    return paths


def _verdicts(paths) -> dict:
    df = results.read_results(paths)
    assert not df.duplicated(["case_id", "impl"]).any()
    return {(r.case_id, r.impl): (r.verdict, r.failure_kind, r.determinism)
            for r in df.itertuples()}


def test_two_workers_sharing_a_device_give_the_verdicts_of_one(runs):
    one = _verdicts([runs["one"]])
    assert len(one) == 16 and sum(v[0] == "fail" for v in one.values()) == 8
    assert _verdicts([runs["two"]]) == one


def test_the_shards_hold_the_runs_items_once_with_its_verdicts(runs):
    s1, s2 = _verdicts([runs["s1"]]), _verdicts([runs["s2"]])
    assert len(s1) == len(s2) == 8 and not set(s1) & set(s2)
    assert {**s1, **s2} == _verdicts([runs["one"]])


def _report(paths, tmp_path, name) -> dict:
    out = tmp_path / f"{name}.json"
    assert main(["report", *map(str, paths), "--format", "json", "--output", str(out)]) == 0
    doc = json.loads(out.read_text())
    for key in ("generated", "sources"):
        doc.pop(key)
    return doc


def test_report_of_the_shards_is_the_report_of_the_run(runs, tmp_path, capsys):
    """The same page, but for the order of the cases: a sweep lists one shard's cases,
    then the next's."""
    from tests.reports.test_report_cli import write

    shards = _report([runs["s1"], runs["s2"]], tmp_path, "shards")
    order = results.read_results([runs["s1"], runs["s2"]])[["case_id", "impl"]]
    whole = results.read_results([runs["one"]])
    as_listed = order.merge(whole, on=["case_id", "impl"], how="left")[whole.columns]
    run = _report([write(as_listed, tmp_path / "whole.parquet")], tmp_path, "whole")
    assert len(shards["summary"].pop("runs")) == 2 and len(run["summary"].pop("runs")) == 1
    # the first screen's identity counts the runs read: the shards are two of them
    items = {d: dict(doc["headline"]["identity"]["fields"])["items"]
             for d, doc in (("shards", shards), ("run", run))}
    assert items == {"shards": "16 from 2 runs", "run": "16"}
    # and when each started: the shards ran after the whole run (a minute apart on a
    # loaded machine)
    for doc in (shards, run):
        doc["headline"]["identity"]["fields"] = [
            f for f in doc["headline"]["identity"]["fields"] if f[0] not in ("items", "started")]
    assert shards == run
    assert run["summary"]["total"]["items"] == 16 and run["summary"]["places"] == []


def test_compare_reads_the_shards_as_one_run(runs, capsys):
    argv = ["compare", str(runs["one"]), str(runs["s1"]), str(runs["s2"]), "--allow-untimed"]
    assert main([*argv, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["current"]["items"] == 16 and len(doc["current"]["run_ids"]) == 2
    counts = doc["counts"]
    assert counts["new_failures"] == counts["disappeared"] == counts["new_cases"] == 0
    assert main(argv) == 0
    assert "compared: 16 items in both runs" in capsys.readouterr().out
    # one shard alone is not the run: the other's items disappeared
    assert main(["compare", str(runs["one"]), str(runs["s1"]), "--allow-untimed",
                 "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["counts"]["disappeared"] == 8


def test_report_groups_the_rows_by_host_and_device_where_they_differ(runs):
    from bwd_suite.reports import render

    s1, s2 = (results.read_results([runs[k]]) for k in ("s1", "s2"))
    s1 = s1.assign(host="node-a", device="cuda:0", device_name="GPU")
    s2 = s2.assign(host="node-b", device="cuda:1", device_name="GPU")
    report = render.build(pd.concat([s1, s2], ignore_index=True))
    places = report.summary.places
    assert [(p.host, p.device, p.rows.raw, p.unexpected.raw) for p in places] == [
        ("node-a", "cuda:0", "8", str(int((s1.verdict == "fail").sum()))),
        ("node-b", "cuda:1", "8", str(int((s2.verdict == "fail").sum())))]
    assert 'data-host="node-b" data-device="cuda:1"' in render.render(report)
    assert render.build(s1).summary.places == ()  # one host and device: no table
