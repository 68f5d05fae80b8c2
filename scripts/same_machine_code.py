"""Does a source change leave the kernels' machine code as it was? Compiles each .cu as it
is now and as it was at a git revision, for one architecture with the build's nvcc flags
(no GPU needed), and compares every kernel's SASS bytes (the cubin's .text sections).

    python3 scripts/same_machine_code.py kernels/softmax/csrc/softmax_bwd.cu
    python3 scripts/same_machine_code.py --rev HEAD~2 kernels/*/csrc/*.cu

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

from suite.errors import SuiteInputError, run_script  # noqa: E402

# an anonymous namespace's mangled name carries a hash of the file's path: dropped, so
# that a kernel compiled from another folder keeps its name
_ANON = re.compile(r"\d+_GLOBAL__N__[0-9a-f]+_\d+_\w+?_cu_[0-9a-f]{8}")


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
            out[_ANON.sub("(anonymous)", name[len(".text."):])] = cubin[off:off + size]
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sources", nargs="+", type=Path, help=".cu files (in the working tree)")
    ap.add_argument("--rev", default="HEAD", help="git revision to compare with (default HEAD)")
    ap.add_argument("--arch", default="90", help="compute capability, e.g. 90 (default)")
    a = ap.parse_args(argv)
    if shutil.which("nvcc") is None:
        raise SuiteInputError("nvcc", "not found on PATH")
    from kernels.cuda_build import NVCC_FLAGS
    flags = [f for f in NVCC_FLAGS if f != "-lineinfo"]  # line tables are not machine code
    differ = 0
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        trees: dict[Path, Path] = {}
        for source in a.sources:
            source = source.resolve()
            if not source.is_file():
                raise SuiteInputError(str(source), "not a file")
            root = _repo_root(source)
            if root not in trees:
                trees[root] = tmp / f"rev{len(trees)}"
                trees[root].mkdir()
                _tree_at(root, a.rev, trees[root])
            old_source = trees[root] / source.relative_to(root)
            if not old_source.is_file():
                raise SuiteInputError(str(source), f"not in revision {a.rev}")
            before = text_sections(compile_cubin(old_source, tmp / "before.cubin", a.arch, flags))
            after = text_sections(compile_cubin(source, tmp / "after.cubin", a.arch, flags))
            lines = compare(before, after)
            rel = source.relative_to(root)
            if lines:
                differ += 1
                print(f"{rel}: {len(lines)} of {len(before | after)} kernels differ from {a.rev}")
                print("\n".join(f"  {line}" for line in lines))
            else:
                print(f"{rel}: all {len(after)} kernels' machine code identical to {a.rev} "
                      f"(sm_{a.arch})")
    return 1 if differ else 0


if __name__ == "__main__":
    run_script(main, "same_machine_code")
