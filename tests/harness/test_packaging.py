"""The package as a user gets it: a real (non-editable) install of this checkout into a
folder, used from a scratch folder outside the checkout. It installs one import name,
`bwd_suite`, with its case files, report templates and CUDA sources inside; it runs beside
another package named `kernels` (Hugging Face's kernel loader is one) without importing it;
and its pytest plugin, loaded from the installed entry point, passes a correct external
implementation and fails a broken one.

The subprocesses run an interpreter that cannot see the checkout. The test environment has
the project installed editable: setuptools' finder (a `__editable__...pth` in
site-packages) maps `bwd_suite` and its folders to the checkout. It sits after the path
finder on sys.meta_path, so PYTHONPATH's copy wins for what that copy holds, but a module
missing from the install would be served from the checkout without a word. The fixture
therefore makes a bare virtual environment whose one .pth lists the test environment's
site-packages as plain folders: torch and pytest import, .pth files there (the editable
finder) never run. The stand-in `kernels` comes first on PYTHONPATH, as an installed one
would, and logs every import of it in the suite's processes: any is a failure.
"""

import importlib.metadata
import importlib.util
import json
import os
import re
import shlex
import shutil
import site
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NAME = "bwd_suite"
FOLDERS = ("suite", "ops", "golden", "kernels", "reports", "cases")
# the package's data, as (folder in the checkout, glob there); each lands in bwd_suite/<folder>
DATA = (("cases", "*/*.toml"), ("reports", "templates/**/*"), ("kernels", "*/csrc/**/*"))
TRAP = "STANDIN_KERNELS_LOG"
STANDIN = f'''"""A stand-in for another package named `kernels` (Hugging Face's kernel loader)."""
import os
import traceback

MARKER = "stand-in kernels"
if os.environ.get("{TRAP}"):
    with open(os.environ["{TRAP}"], "a") as log:
        log.write("".join(traceback.format_stack()) + "\\n")
'''
# an external softmax backward as a user would write one (the contract: docs/contract.md;
# dropout as kernels/softmax/torch_ref.py applies it), in fp32 with one rounding
CORRECT = '''import torch


def bwd(*, y, dy, mask, scale, out):
    yf, g = y.float(), dy.float()
    if mask is not None:
        g = torch.where(mask, g * scale, 0.0)
    out["dx"].copy_(yf * (g - (g * yf).sum(-1, keepdim=True)))
'''
BROKEN = CORRECT.replace("(g - (g * yf).sum(-1, keepdim=True))", "g")  # no row-sum term
PYTEST = ["-m", "pytest", "-p", "no:cacheprovider", "-q", "--pyargs", f"{NAME}.cases",
          "--suite-op", "softmax", "--suite-profile", "ci", "--suite-device", "cpu"]


@dataclass(frozen=True)
class Install:
    src: Path      # the snapshot of the checkout that was built
    wheel: Path
    site: Path     # pip install --target
    python: Path   # the bare environment's interpreter
    standin: Path  # the folder holding the stand-in `kernels`
    tmp: Path

    def run(self, *args, cwd: Path, trap: bool = True, timeout: float = 300):
        """`python ARGS` in cwd with PYTHONPATH = stand-in, install; with trap, fails when
        anything imported the stand-in `kernels`."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("PYTHON", "PYTEST_")) and k not in ("CI", "BUILD_NUMBER")}
        env.update(PYTHONPATH=os.pathsep.join([str(self.standin), str(self.site)]),
                   PYTHONNOUSERSITE="1")
        log = self.tmp / "kernels-imports.log"
        log.unlink(missing_ok=True)
        if trap:
            env[TRAP] = str(log)
        r = subprocess.run([str(self.python), *args], cwd=cwd, env=env, capture_output=True,
                           text=True, timeout=timeout)
        assert not log.exists(), \
            f"{shlex.join(args)[:300]} imported `kernels`:\n{log.read_text()}"
        return r


def _check(*cmd, **kw) -> str:
    """Run a setup step; its output is the failure message when it fails."""
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=300, **kw)
    assert r.returncode == 0, f"{shlex.join(map(str, cmd))}:\n{(r.stdout + r.stderr)[-3000:]}"
    return r.stdout


def _copy_checkout(dest: Path) -> Path:
    """The checkout's files as git sees them (tracked and new, not ignored): the build
    writes its build/ and egg-info there, not in a checkout others work in."""
    names = _check("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard",
                   cwd=ROOT)
    for name in filter(None, names.split("\0")):
        if (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    return dest


def _bare_environment(tmp: Path) -> Path:
    """A virtual environment without pip whose site-packages holds one .pth naming this
    environment's site folders: their packages import, their .pth files do not run."""
    _check(sys.executable, "-m", "venv", "--without-pip", tmp / "venv")
    python = tmp / "venv" / "bin" / "python"
    purelib = _check(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    purelib = purelib.strip()
    (Path(purelib) / "outer-site.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return python


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Install:
    tmp = tmp_path_factory.mktemp("packaging")
    src = _copy_checkout(tmp / "src")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    # no download where setuptools is here; where it is not (a venv of Python 3.12 made
    # by .ci/run), pip's isolated build fetches it as the newcomer's install did
    isolation = ["--no-build-isolation"] if importlib.util.find_spec("setuptools") else []
    _check(*pip, "wheel", "--no-deps", *isolation, "-w", tmp / "wheel", src, cwd=tmp)
    wheel, = (tmp / "wheel").glob("*.whl")
    _check(*pip, "install", "--no-deps", "--no-index", "--target", tmp / "site", wheel, cwd=tmp)
    (tmp / "standin" / "kernels").mkdir(parents=True)
    (tmp / "standin" / "kernels" / "__init__.py").write_text(STANDIN)
    return Install(src, wheel, tmp / "site", _bare_environment(tmp), tmp / "standin", tmp)


def _top_level(names) -> set:
    return {Path(n).parts[0] for n in names}


def test_installs_one_import_name(installed):
    """The wheel and the folder pip installs it into hold `bwd_suite` and its dist-info,
    nothing else (bin/ holds the console script): no top-level suite, ops, kernels, ..."""
    dist_info = f"{NAME}-{installed.wheel.name.split('-')[1]}.dist-info"
    assert _top_level(zipfile.ZipFile(installed.wheel).namelist()) == {NAME, dist_info}
    assert {p.name for p in installed.site.iterdir()} - {"bin"} == {NAME, dist_info}
    assert (installed.site / dist_info / "top_level.txt").read_text().split() == [NAME]
    dist = importlib.metadata.Distribution.at(installed.site / dist_info)
    assert {(e.group, e.name) for e in dist.entry_points} == {
        ("console_scripts", "bwd-suite"), ("pytest11", f"{NAME}.plugin")}
    assert all(e.module.split(".")[0] == NAME for e in dist.entry_points)


def test_installs_every_module_and_data_file_inside_the_package(installed):
    """Every module of the folders, every case file, report template and CUDA source of the
    snapshot built is in bwd_suite/ of the install."""
    inside = installed.site / NAME
    wanted = [(folder, "**/*.py") for folder in FOLDERS] + list(DATA)
    for folder, pattern in wanted:
        files = {p.relative_to(installed.src / folder)
                 for p in (installed.src / folder).glob(pattern) if p.is_file()}
        assert files, f"{folder}/{pattern} matches nothing in the checkout"
        missing = sorted(str(f) for f in files if not (inside / folder / f).is_file())
        assert not missing, f"not installed under {NAME}/{folder}/: {missing}"


def test_a_neighbour_named_kernels_keeps_its_name(installed, tmp_path):
    """`import kernels` beside the install finds the other package (ours installs none)."""
    r = installed.run("-c", "import kernels; print(kernels.MARKER)", cwd=tmp_path, trap=False)
    assert (r.returncode, r.stdout.strip()) == (0, "stand-in kernels"), r.stderr


CHECK = """
import importlib.metadata, importlib.util, inspect, json, sys
import bwd_suite
dist = importlib.metadata.distribution("bwd-suite")
from bwd_suite.suite import registry
impls = {op: [i.name for i in registry.select_implementations(op, None)] for op in registry.ops()}
print(json.dumps({
    "origins": [importlib.util.find_spec(m).origin for m in
                ("bwd_suite", "bwd_suite.suite.registry", "bwd_suite.kernels.softmax",
                 "bwd_suite.plugin", "bwd_suite.cases")],
    "path": list(bwd_suite.__path__),
    "editable": [repr(f) for f in sys.meta_path if "editable" in repr(f).lower()],
    "dist": str(dist.locate_file("")),
    "entry_points": {e.name: inspect.getfile(e.load()) for e in dist.entry_points},
    "impls": impls,
}))
"""


def test_the_installed_package_is_the_one_imported(installed, tmp_path):
    """From outside the checkout, bwd_suite, its modules, its metadata and what its entry
    points load come from the install (no editable finder), and loading every
    implementation imports no bare `kernels`."""
    r = installed.run("-c", CHECK, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    seen = json.loads(r.stdout)
    assert seen["path"] == [str(installed.site / NAME)]
    inside = str(installed.site / NAME) + os.sep
    files = seen["origins"] + list(seen["entry_points"].values())
    assert all(f.startswith(inside) for f in files), seen
    assert seen["dist"] == str(installed.site) and len(seen["entry_points"]) == 2, seen
    assert not seen["editable"]
    assert "torch_ref" in seen["impls"]["softmax"]


def test_the_command_line_runs_beside_kernels(installed, tmp_path):
    """`python -m bwd_suite list` and a smoke run of softmax on the CPU, beside the stand-in:
    both exit 0 and the run's results show the eager implementations passing."""
    r = installed.run("-m", NAME, "list", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "softmax/torch_ref" in r.stdout
    out = tmp_path / "r"
    r = installed.run("-m", NAME, "run", "--op", "softmax", "--profile", "smoke",
                      "--device", "cpu", "--no-timing", "--repeats", "1", "--quiet",
                      "--out", str(out), cwd=tmp_path)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    read = ("import json, sys; from bwd_suite.suite.results import read_results; "
            "df = read_results([sys.argv[1]]); "
            "print(json.dumps(df.groupby(['impl', 'verdict']).size().reset_index()"
            ".values.tolist()))")
    r = installed.run("-c", read, str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    counts = {(impl, verdict): n for impl, verdict, n in json.loads(r.stdout)}
    for impl in ("torch_ref", "torch_fused_fp32"):
        assert counts.get((impl, "pass"), 0) > 0, counts
    assert {v for _, v in counts} <= {"pass", "unsupported"}, counts


def _last(out: str) -> str:
    return out.strip().splitlines()[-1]


def _command(out: str, label: str) -> list:
    line = next(line for line in out.splitlines() if line.strip().startswith(label))
    return shlex.split(line.split(label, 1)[1])


def test_the_pytest_plugin_from_another_repository(installed, tmp_path):
    """A user's folder with two softmax backwards and no conftest.py: the installed entry
    point's plugin collects the package's case files, passes the correct one, fails the
    broken one (stopped after 3 failures), and each failure's rerun commands work from
    that folder."""
    (tmp_path / "mine.py").write_text(CORRECT)
    (tmp_path / "broken.py").write_text(BROKEN)
    assert not [p for p in (tmp_path, *tmp_path.parents) if (p / "conftest.py").exists()]

    r = installed.run(*PYTEST, "--suite-impl", "softmax=mine:bwd", "--trace-config",
                      cwd=tmp_path)
    out = r.stdout + r.stderr
    assert r.returncode == 0 and re.fullmatch(r"\d+ passed in .*", _last(out)), out[-3000:]
    assert (f"PLUGIN registered: <module '{NAME}.plugin' from "
            f"'{installed.site / NAME / 'plugin.py'}'>") in out

    r = installed.run(*PYTEST, "--suite-impl", "softmax=broken:bwd", "--maxfail", "3",
                      cwd=tmp_path)
    out = r.stdout + r.stderr
    assert r.returncode == 1 and _last(out).startswith("3 failed in"), out[-3000:]
    assert "FAILED softmax/" in out and "[broken:bwd]" in out and "dx mismatch" in out

    words = _command(out, "rerun it alone:")
    assert words[:3] == ["python", "-m", "pytest"], words
    again = installed.run(*words[1:], "-p", "no:cacheprovider", "-q", cwd=tmp_path)
    assert again.returncode == 1 and _last(again.stdout).startswith("1 failed in"), \
        (again.stdout + again.stderr)[-3000:]
    words = _command(out, "or:")
    assert words[:4] == ["python", "-m", NAME, "run"], words
    again = installed.run(*words[1:], "--no-timing", "--quiet", "--out",
                          str(tmp_path / "again"), cwd=tmp_path)
    assert again.returncode == 1 and "broken:bwd" in again.stdout, \
        (again.stdout + again.stderr)[-3000:]

    # the options exist only through the entry point named bwd_suite.plugin
    r = installed.run(*PYTEST, "-p", f"no:{NAME}.plugin", cwd=tmp_path)
    assert r.returncode == 4 and "unrecognized arguments: --suite-op" in r.stderr, r.stderr
