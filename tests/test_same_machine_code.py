"""scripts/same_machine_code.py: a change that keeps every kernel's SASS bytes passes, one
that changes a kernel (or adds one) is listed and fails; built with nvcc, no GPU."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import same_machine_code  # noqa: E402
from suite.errors import SuiteInputError  # noqa: E402

KERNEL = """// scale in place
__global__ void scale(float *x) { x[threadIdx.x] *= 2.f; }
"""


def _git(repo, *args):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo,
                   check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path):
    src = tmp_path / "kernels" / "k.cu"
    src.parent.mkdir()
    src.write_text(KERNEL)
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-qm", "k")
    return src


nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")


@nvcc
def test_comment_and_layout_changes_keep_the_machine_code(repo, capsys):
    repo.write_text("// scale in place, reformatted\n__global__ void scale(float *x) {\n"
                    "  x[threadIdx.x] *= 2.f;  // doubled\n}\n")
    assert same_machine_code.main([str(repo)]) == 0
    assert "all 1 kernels' machine code identical to HEAD" in capsys.readouterr().out


@nvcc
def test_changed_and_added_kernels_are_listed(repo, capsys):
    repo.write_text(KERNEL.replace("2.f", "3.f")
                    + "__global__ void zero(float *x) { x[0] = 0.f; }\n")
    assert same_machine_code.main([str(repo)]) == 1
    out = capsys.readouterr().out
    assert "2 of 2 kernels differ from HEAD" in out
    assert "changed  _Z5scalePf" in out and "added    _Z4zeroPf" in out


@nvcc
def test_a_file_missing_at_the_revision_is_bad_input(repo):
    new = repo.parent / "new.cu"
    new.write_text(KERNEL)
    with pytest.raises(SuiteInputError, match="not in revision HEAD"):
        same_machine_code.main([str(new)])


def test_anonymous_namespace_names_do_not_depend_on_the_path():
    a = "_ZN47_GLOBAL__N__518fa19e_14_softmax_bwd_cu_b2469b7b18softmax_bwd_kernelIfEEv"
    b = "_ZN47_GLOBAL__N__0a1b2c3d_14_softmax_bwd_cu_00ff00ff18softmax_bwd_kernelIfEEv"
    assert same_machine_code._ANON.sub("", a) == same_machine_code._ANON.sub("", b)
    assert same_machine_code._ANON.sub("", a).endswith("18softmax_bwd_kernelIfEEv")


def test_not_a_cubin_is_refused():
    with pytest.raises(ValueError, match="not a 64-bit"):
        same_machine_code.text_sections(b"not an elf file")
