"""Does a source change leave the kernels' machine code as it was? Compiles each .cu as it
is now and as it was at a git revision, for one architecture with the build's nvcc flags
(no GPU needed), and compares every kernel's SASS bytes (the cubin's .text sections).

    python3 scripts/same_machine_code.py kernels/softmax/csrc/softmax_bwd_rows.cu
    python3 scripts/same_machine_code.py --rev HEAD~2 kernels/*/csrc/*.cu
    python3 scripts/same_machine_code.py --was kernels/causal_conv1d/csrc/conv1d_bwd.cu \
        kernels/causal_conv1d/csrc/conv1d_bwd_*.cu

Without --was each source is compared with the same file at the revision. With --was
(repeatable: the files at the revision, which may be gone now) the sources are a split or a
merge of those files: the kernels of all the sources together must be, by name, those of
all the --was files together, each byte-identical, and a kernel that two sources both
compile must be identical in both.

A refactor whose kernels all come out byte-identical cannot change a result or a timing,
so it needs no GPU run; one that changes any kernel does. Exit status 0 when every kernel
is identical, 1 when any differs (each one listed), 2 on bad input or a failed build.
"""

from __future__ import annotations

import argparse
import re
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bwd_suite.suite.errors import SuiteInputError, run_script  # noqa: E402

# an anonymous namespace's mangled name (<length>_GLOBAL__N_...) carries a hash of the
# file's path and a unique id of the translation unit: dropped, so that a kernel compiled
# from another file or folder keeps its name
_ANON = re.compile(r"(\d+)_GLOBAL__N_")


def kernel_name(mangled: str) -> str:
    """The mangled name with each anonymous namespace written as (anonymous)."""
    out, at = [], 0
    for m in _ANON.finditer(mangled):
        if m.start() < at:
            continue  # inside a namespace name already dropped
        out.append(mangled[at:m.start()] + "(anonymous)")
        at = m.start(1) + len(m.group(1)) + int(m.group(1))
    return "".join(out) + mangled[at:]


def text_sections(cubin: bytes) -> dict[str, bytes]:
    """Kernel name -> its machine code, from a 64-bit little-endian ELF cubin."""
    if cubin[:4] != b"\x7fELF" or cubin[4] != 2 or cubin[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF file")
    shoff = struct.unpack_from("<Q", cubin, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", cubin, shoff + i * shentsize) for i in range(shnum)]
    names_at = headers[shstrndx][4]
    out = {}
    for name_off, _type, _flags, _addr, off, size in headers:
        start = names_at + name_off
        name = cubin[start:cubin.index(b"\0", start)].decode()
        if name.startswith(".text."):
            out[kernel_name(name[len(".text."):])] = cubin[off:off + size]
    return out


def compile_cubin(source: Path, out: Path, arch: str, flags: list[str]) -> bytes:
    r = subprocess.run(["nvcc", "-cubin", *flags, f"-gencode=arch=compute_{arch},code=sm_{arch}",
                        str(source), "-o", str(out)], capture_output=True, text=True)
    if r.returncode:
        raise SuiteInputError(str(source), f"nvcc failed: {r.stderr.strip()[-2000:]}")
    return out.read_bytes()


def compare(before: dict[str, bytes], after: dict[str, bytes]) -> list[str]:
    """One line per kernel that differs, was added or was removed (none: identical)."""
    lines = []
    for name in sorted(before.keys() | after.keys()):
        if name not in after:
            lines.append(f"removed  {name}")
        elif name not in before:
            lines.append(f"added    {name}")
        elif before[name] != after[name]:
            lines.append(f"changed  {name} ({len(before[name])} -> {len(after[name])} bytes)")
    return lines


def union(kernels: dict[str, dict[str, bytes]]) -> tuple[dict[str, bytes], list[str]]:
    """The kernels of several files (file -> its kernels) taken together, and one line per
    kernel that two of them compile differently (none: each name means one machine code)."""
    out: dict[str, bytes] = {}
    first: dict[str, str] = {}
    lines = []
    for file, own in kernels.items():
        for name, code in own.items():
            if name not in out:
                out[name], first[name] = code, file
            elif out[name] != code:
                lines.append(f"differs  {name} ({first[name]} and {file})")
    return out, lines


def _repo_root(path: Path) -> Path:
    r = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=path.parent,
                       capture_output=True, text=True)
    if r.returncode:
        raise SuiteInputError(str(path), "not inside a git repository")
    return Path(r.stdout.strip())


def _tree_at(root: Path, rev: str, dest: Path) -> None:
    """The repository's files at rev under dest (includes resolve as they did then)."""
    archive = subprocess.run(["git", "archive", rev], cwd=root, capture_output=True)
    if archive.returncode:
        raise SuiteInputError(f"--rev {rev}", archive.stderr.decode().strip())
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)


def _source(path: Path) -> Path:
    """A .cu file of the working tree, resolved (host .cpp files have no kernels)."""
    path = path.resolve()
    if not path.is_file():
        raise SuiteInputError(str(path), "not a file")
    if path.suffix != ".cu":
        raise SuiteInputError(str(path), "not a .cu file (host code has no kernels)")
    return path


class _Builds:
    """Cubins of working-tree files and of the same paths at one revision, in one folder."""

    def __init__(self, tmp: Path, rev: str, arch: str, flags: list[str]):
        self.tmp, self.rev, self.arch, self.flags = tmp, rev, arch, flags
        self.trees: dict[Path, Path] = {}
        self.count = 0

    def _cubin(self, source: Path) -> dict[str, bytes]:
        self.count += 1
        out = self.tmp / f"k{self.count}.cubin"
        return text_sections(compile_cubin(source, out, self.arch, self.flags))

    def now(self, source: Path) -> dict[str, bytes]:
        return self._cubin(source)

    def then(self, path: Path, root: Path) -> dict[str, bytes]:
        """The kernels of path (in the working tree's layout) as it was at the revision."""
        if root not in self.trees:
            self.trees[root] = self.tmp / f"rev{len(self.trees)}"
            self.trees[root].mkdir()
            _tree_at(root, self.rev, self.trees[root])
        try:
            rel = path.relative_to(root)
        except ValueError:
            raise SuiteInputError(str(path), f"not inside the repository {root}") from None
        old = self.trees[root] / rel
        if not old.is_file():
            raise SuiteInputError(str(path), f"not in revision {self.rev}")
        return self._cubin(old)


def _report(what: str, lines: list[str], kernels: int, rev: str, arch: str) -> bool:
    """Prints the comparison's verdict; True when every kernel is identical."""
    if lines:
        print(f"{what}: {len(lines)} of {kernels} kernels differ from {rev}")
        print("\n".join(f"  {line}" for line in lines))
        return False
    print(f"{what}: all {kernels} kernels' machine code identical to {rev} (sm_{arch})")
    return True


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sources", nargs="+", type=Path, help=".cu files (in the working tree)")
    ap.add_argument("--rev", default="HEAD", help="git revision to compare with (default HEAD)")
    ap.add_argument("--was", action="append", type=Path, default=[], metavar="PATH",
                    help="a file at --rev whose kernels the sources together must reproduce "
                         "(repeatable; it may be gone from the working tree)")
    ap.add_argument("--arch", default="90", help="compute capability, e.g. 90 (default)")
    a = ap.parse_args(argv)
    if shutil.which("nvcc") is None:
        raise SuiteInputError("nvcc", "not found on PATH")
    from bwd_suite.kernels.cuda_build import NVCC_FLAGS
    flags = [f for f in NVCC_FLAGS if f != "-lineinfo"]  # line tables are not machine code
    sources = [_source(s) for s in a.sources]
    with tempfile.TemporaryDirectory() as tmp:
        builds = _Builds(Path(tmp), a.rev, a.arch, flags)
        if a.was:
            return 0 if _compare_split(builds, sources, a.was) else 1
        differ = 0
        for source in sources:
            root = _repo_root(source)
            before = builds.then(source, root)
            after = builds.now(source)
            lines = compare(before, after)
            if not _report(str(source.relative_to(root)), lines, len(before | after), a.rev,
                           a.arch):
                differ += 1
    return 1 if differ else 0


def _compare_split(builds: _Builds, sources: list[Path], was: list[Path]) -> bool:
    """The sources' kernels together against the --was files' kernels together."""
    root = _repo_root(sources[0])

    def rel(path: Path) -> str:
        return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)

    old = {rel(p.resolve()): builds.then(p.resolve(), root) for p in was}
    new = {rel(s): builds.now(s) for s in sources}
    before, clash_before = union(old)
    after, clash_after = union(new)
    for file, own in new.items():
        print(f"{file}: {len(own)} kernels")
    lines = clash_before + compare(before, after) + clash_after
    return _report(f"{len(new)} sources", lines, len(before | after),
                   f"{' + '.join(old)} at {builds.rev}", builds.arch)


if __name__ == "__main__":
    run_script(main, "same_machine_code")
