"""Several GPUs, checked on a CPU: which GPU each worker gets (suite/gpus.py), and the
checks of --gpus and --share-gpus."""

from pathlib import Path

import pytest
import torch

from suite import gpus, results
from suite.cli import build_parser, main
from suite.errors import SuiteInputError


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
    from suite.commands.run import pool_options

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
    from suite.commands.run import gpus_device

    assert gpus_device(_args("--gpus", "2,3"), four_gpus) == torch.device("cuda", 2)
    args = _args("--gpus", "2,3", "--device", "cuda:3")
    assert gpus_device(args, torch.device("cuda", 3)) == torch.device("cuda", 3)
    with pytest.raises(SuiteInputError, match="--gpus: 2,3 leaves out the run's --device"):
        gpus_device(_args("--gpus", "2,3", "--device", "cuda:1"), torch.device("cuda", 1))


def test_a_pool_worker_sees_only_its_gpu(tmp_path, monkeypatch):
    from suite.runner import RunOptions
    from suite.workers import Pool, PoolOptions

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
])
def test_bad_gpu_options_exit_2_with_one_line(argv, flag, capsys, tmp_path):
    assert main(["run", *SMALL, *argv, "--output", str(tmp_path / "r.parquet")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {flag}: "), err
    assert not (tmp_path / "r.parquet").exists()


# -- workers give the run's verdicts ------------------------------------------------------

RUN = [*SMALL, "--no-timing", "--impl", "torch_ref,causal_conv1d=tests.helpers:doubles_dx"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The bias cases with a right and a wrong implementation (8 of 16 items fail): with
    one worker, and with two workers on the one device."""
    folder = tmp_path_factory.mktemp("shards")
    argv = {"one": ["--workers", "1"], "two": ["--workers", "2", "--share-gpus"]}
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
