"""scripts/same_machine_code.py: a change that keeps every kernel's SASS bytes passes, one
that changes a kernel (or adds one) is listed and fails, also when one file is split into
several (--was); built with nvcc, no GPU."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import same_machine_code  # noqa: E402
from bwd_suite.suite.errors import SuiteInputError  # noqa: E402

KERNEL = """// scale in place
__global__ void scale(float *x) { x[threadIdx.x] *= 2.f; }
"""
ZERO = "__global__ void zero(float *x) { x[0] = 0.f; }\n"
# a kernel in an anonymous namespace: its mangled name carries a hash of the file's path
ANON = "namespace {\n__global__ void neg(float *x) { x[0] = -x[0]; }\n}\n" \
       "void launch_neg(float *x) { neg<<<1, 1>>>(x); }\n"


def _git(repo, *args):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo,
                   check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path):
    src = tmp_path / "kernels" / "k.cu"
    src.parent.mkdir()
    src.write_text(KERNEL)
    (src.parent / "two.cu").write_text(KERNEL + ZERO + ANON)
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


@nvcc
def test_a_split_that_keeps_every_kernel_passes(repo, capsys):
    """two.cu at HEAD split into a.cu and b.cu (and gone): the kernels taken together are
    compared, wherever they now live; a kernel both files compile alike counts once."""
    two = repo.parent / "two.cu"
    (repo.parent / "a.cu").write_text(KERNEL + "// the anonymous namespace moves too\n" + ANON)
    (repo.parent / "b.cu").write_text(ZERO + KERNEL)
    two.unlink()
    args = ["--was", str(two), str(repo.parent / "a.cu"), str(repo.parent / "b.cu")]
    assert same_machine_code.main(args) == 0
    out = capsys.readouterr().out
    assert "kernels/a.cu: 2 kernels" in out and "kernels/b.cu: 2 kernels" in out
    assert "2 sources: all 3 kernels' machine code identical to kernels/two.cu at HEAD" in out


@nvcc
def test_a_split_that_drops_adds_or_forks_a_kernel_is_listed(repo, capsys):
    two = repo.parent / "two.cu"
    a, b = repo.parent / "a.cu", repo.parent / "b.cu"
    a.write_text(KERNEL + "__global__ void one(float *x) { x[0] = 1.f; }\n")
    b.write_text(KERNEL.replace("2.f", "3.f") + ANON)
    assert same_machine_code.main(["--was", str(two), str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert "3 of 4 kernels differ from kernels/two.cu at HEAD" in out
    assert "removed  _Z4zeroPf" in out and "added    _Z3onePf" in out
    assert "differs  _Z5scalePf (kernels/a.cu and kernels/b.cu)" in out


@nvcc
def test_was_files_must_be_at_the_revision_and_sources_cu_files(repo):
    with pytest.raises(SuiteInputError, match="not in revision HEAD"):
        same_machine_code.main(["--was", str(repo.parent / "gone.cu"), str(repo)])
    host = repo.parent / "plan.cpp"
    host.write_text("int plan() { return 1; }\n")
    with pytest.raises(SuiteInputError, match="not a .cu file"):
        same_machine_code.main(["--was", str(repo), str(host)])


def test_union_lists_a_kernel_compiled_two_ways():
    kernels, lines = same_machine_code.union({"a.cu": {"k": b"1", "x": b"2"},
                                              "b.cu": {"k": b"1", "y": b"3"},
                                              "c.cu": {"x": b"4"}})
    assert kernels == {"k": b"1", "x": b"2", "y": b"3"}
    assert lines == ["differs  x (a.cu and c.cu)"]


def test_anonymous_namespace_names_do_not_depend_on_the_path():
    a = "_ZN47_GLOBAL__N__518fa19e_14_softmax_bwd_cu_b2469b7b18softmax_bwd_kernelIfEEv"
    b = "_ZN47_GLOBAL__N__0a1b2c3d_14_softmax_bwd_cu_00ff00ff18softmax_bwd_kernelIfEEv"
    # another file, and a translation-unit id after the hash
    c = "_ZN59_GLOBAL__N__942719e6_20_conv1d_bwd_reduce_cu_522eb034_1699518softmax_bwd_kernelIfEEv"
    names = {same_machine_code.kernel_name(n) for n in (a, b, c)}
    assert names == {"_ZN(anonymous)18softmax_bwd_kernelIfEEv"}
    # a template argument in another anonymous namespace is dropped the same way
    d = "_Z1kIN34_GLOBAL__N__9b914f75_4_a_cu__Z1lPf1TEEvv"
    assert same_machine_code.kernel_name(d) == "_Z1kIN(anonymous)1TEEvv"


def test_not_a_cubin_is_refused():
    with pytest.raises(ValueError, match="not a 64-bit"):
        same_machine_code.text_sections(b"not an elf file")
