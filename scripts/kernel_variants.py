"""Time variants of one op's CUDA kernel against the shipped one, in one suite run (GPU).

A variant is the op's kernel sources with exact text edits, described in a TOML file:

    [[variant]]
    name = "lb3"
    why = "3 blocks of 512 an SM for the C = 2 block kernel"
    [[variant.edit]]
    file = "softmax/csrc/softmax_bwd_launchers.h"  # under kernels/
    old = ": C <= 2 ? kMaxThreadsC2 : kMaxThreads)"
    new = ": C <= 2 ? kMaxThreadsC2 : kMaxThreads, C == 2 ? 3 : 1)"

Each `old` must occur exactly once in its file (the error names the variant, file and
count). A larger change can come as a unified diff instead of (or before) the edits:
`patch = "my_change.patch"` (relative to the TOML file, paths as `git diff` writes them from
the repository root), applied with `git apply`, which refuses a patch that does not fit.

Every variant gets a copy of kernels/<op>/csrc and kernels/common/csrc with its edits,
built as its own extension, and runs as implementation `cuda+NAME` beside `cuda` through
the suite's own runner: verdicts against float64, determinism, CUDA-event timing
with the L2 flushed, one parquet. So a kernel idea is measured, correct or not, in the
same run as the kernel it would replace:

    python3 scripts/kernel_variants.py --op softmax --variants my.toml --case 4096x8192

--with liger,torch_ref times other implementations of the op in the same run, so that a
variant is also compared with its peers (a vendor kernel absent there runs as unsupported).

--twin adds `cuda+twin`: the shipped sources unchanged, built as their own extension and
timed last in each case, after the variants. It is the control for the order: a case's
implementations are timed one after the other, and at 16-25 us cases an H200 run once
timed the same code 3-5% apart between first and third place (docs/timing.md#warm-up).
A variant that beats `cuda` by less than `cuda+twin` does is not faster.
--l2-flush picks the flush before each sample (suite.timing; default clean).
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import subprocess
import sys
import tempfile
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bwd_suite.suite.cli import add_gpu_timing_options, at_least  # noqa: E402
from bwd_suite.suite.errors import SuiteInputError, did_you_mean, run_script  # noqa: E402

KERNELS = Path(__file__).resolve().parents[1] / "kernels"


@dataclasses.dataclass
class Variant:
    name: str
    why: str
    edits: list  # (file under kernels/, old, new)
    patch: Path | None = None  # unified diff applied before the edits


def load_variants(path: Path) -> list[Variant]:
    """The variants of a TOML file, checked for shape (names unique and plain)."""
    try:
        data = tomllib.loads(Path(path).read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise SuiteInputError(str(path), f"cannot read the variants: {e}") from e
    out, seen = [], set()
    for i, v in enumerate(data.get("variant", [])):
        where = f"{path}: variant {i + 1}"
        name = v.get("name", "")
        if not name or not name.replace("_", "").isalnum() or not name.isascii() or name in seen:
            raise SuiteInputError(where, f"name {name!r} must be unique ASCII letters, digits "
                                         f"or _ (it names a Python extension module)")
        seen.add(name)
        edits = []
        for j, e in enumerate(v.get("edit", [])):
            missing = {"file", "old", "new"} - set(e)
            if missing:
                raise SuiteInputError(f"{where} ({name}), edit {j + 1}",
                                      f"missing {sorted(missing)}")
            edits.append((e["file"], e["old"], e["new"]))
        patch = None
        if "patch" in v:
            patch = Path(path).parent / v["patch"]
            if not patch.is_file():
                raise SuiteInputError(f"{where} ({name})", f"patch {patch} is not a file")
        if not edits and patch is None:
            raise SuiteInputError(f"{where} ({name})", "has no patch and no [[variant.edit]]")
        out.append(Variant(name, v.get("why", ""), edits, patch))
    if not out:
        raise SuiteInputError(str(path), "defines no [[variant]]")
    return out


def write_sources(variant: Variant, op: str, root: Path) -> Path:
    """kernels/<op>/csrc and kernels/common/csrc under root with the variant's edits;
    returns root/kernels/<op>/csrc."""
    for part in (f"{op}/csrc", "common/csrc"):
        shutil.copytree(KERNELS / part, root / "kernels" / part)
    if variant.patch is not None:
        # Outside a repository git apply works on plain files; it changes nothing unless
        # every hunk fits, and names the hunk that does not. Only this op's and the common
        # files are taken: one patch may serve several ops.
        apply = ["git", "apply", "--whitespace=nowarn", f"--include=kernels/{op}/csrc/*",
                 "--include=kernels/common/csrc/*", str(variant.patch.resolve())]
        touched = subprocess.run(apply[:2] + ["--numstat"] + apply[2:], cwd=root,
                                 capture_output=True, text=True)
        if not touched.returncode and not touched.stdout.strip():
            raise SuiteInputError(f"variant {variant.name}, {variant.patch}",
                                  f"changes no file of kernels/{op}/csrc or common/csrc")
        done = subprocess.run(apply, cwd=root, capture_output=True, text=True)
        if done.returncode:
            raise SuiteInputError(f"variant {variant.name}, {variant.patch}",
                                  f"does not apply to kernels/{op}/csrc or common/csrc: "
                                  f"{done.stderr.strip()}")
    for file, old, new in variant.edits:
        target = root / "kernels" / file
        if not target.is_file() or not target.resolve().is_relative_to((root / "kernels").resolve()):
            raise SuiteInputError(f"variant {variant.name}",
                                  f"{file} is not a file of kernels/{op}/csrc or common/csrc")
        text = target.read_text()
        count = text.count(old)
        if count != 1:
            raise SuiteInputError(f"variant {variant.name}, {file}",
                                  f"the old text occurs {count} times (must be once): {old[:80]!r}")
        target.write_text(text.replace(old, new))
    return root / "kernels" / op / "csrc"


TWIN = Variant("twin", "the shipped sources unchanged, timed last: the control for the order",
               [])


def planned_variants(path: Path | None, twin: bool) -> list:
    """The variants of `path` (none without one), then the twin when asked for."""
    variants = load_variants(path) if path is not None else []
    if twin and any(v.name == TWIN.name for v in variants):
        raise SuiteInputError(str(path), f"a variant is named {TWIN.name!r}, as --twin's is")
    if not variants and not twin:
        raise SuiteInputError("--variants", "give a variants file, or --twin alone")
    return variants + ([TWIN] if twin else [])


def variant_implementation(base, module, variant: Variant, ext):
    """`base` (the op's cuda implementation, whose module calls module.extension()) running
    on the variant's extension instead."""
    def fn(**kwargs):
        shipped = module.extension
        module.extension = lambda: ext
        try:
            return base.fn(**kwargs)
        finally:
            module.extension = shipped
    return dataclasses.replace(base, name=f"{base.name}+{variant.name}", fn=fn,
                               doc=variant.why or base.doc, build=None, known_failures={})


def _print_row(row) -> None:
    print(f"{row.impl:<24} {row.case_id:<60} {row.verdict:<6} "
          f"{(row.frac_copy_bw or 0):.3f} {(row.frac_same_copy or 0):.3f}",
          file=sys.stderr, flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--op", required=True, help="op whose kernels/<op>/cuda.py is varied")
    ap.add_argument("--variants", type=Path, help="TOML file of [[variant]]")
    ap.add_argument("--twin", action="store_true",
                    help="also time the shipped sources as cuda+twin, last in each case "
                         "(the control for the order of implementations)")
    add_gpu_timing_options(ap)
    ap.add_argument("--profile", default="perf", help="cases of this profile (default perf)")
    ap.add_argument("--case", action="append", help="only case ids containing this (repeatable)")
    ap.add_argument("--repeats", type=int, default=3, help="determinism repeats (default 3)")
    ap.add_argument("--output", type=Path, default=Path("variants.parquet"))
    ap.add_argument("--jobs", type=int, default=4, help="builds at once (default 4)")
    ap.add_argument("--with", dest="peers", default="",
                    help="other implementations of the op timed in the same run "
                         "(comma-separated names, e.g. liger,torch_ref)")
    a = ap.parse_args(argv)
    at_least(a, "warmup_ms", 0)  # before the builds, not after them in the first timing
    variants = planned_variants(a.variants, a.twin)

    import importlib

    import torch

    from bwd_suite.kernels.cuda_build import load_extension
    from bwd_suite.suite import registry, results, roofline, summary
    from bwd_suite.suite.cases import load_cases
    from bwd_suite.suite.driver import Driver, Each, Rows, Tee
    from bwd_suite.suite.plan import Plan
    from bwd_suite.suite.runner import RunOptions

    spec = registry.op(a.op, where="--op")
    module = importlib.import_module(f"bwd_suite.kernels.{a.op}.cuda")
    known = {i.name: i for i in registry.implementations(a.op)}
    base = known["cuda"]
    peers = [n.strip() for n in a.peers.split(",") if n.strip()]
    others = set(known) - {"cuda"}  # the variants are cuda's
    unknown = [n for n in peers if n not in others]
    if unknown:
        raise SuiteInputError("--with", "; ".join(did_you_mean(n, others) for n in unknown)
                              + f" (the other implementations of {a.op})")
    cases = [c for c in load_cases(op=a.op, profile=a.profile)
             if not a.case or any(s in c.id for s in a.case)]
    if not cases:
        raise SuiteInputError("--case", f"no {a.op} case of profile {a.profile} matches")
    if not torch.cuda.is_available():
        raise SuiteInputError("--op", "variants build and run on a CUDA device only")

    def build(v, csrc):  # the shipped build (flags, architecture), on the variant's sources
        print(f"building {v.name} ...", file=sys.stderr, flush=True)
        return load_extension(f"bwd_variant_{a.op}_{v.name}",
                              [csrc / Path(s).name for s in module.SOURCES])

    with tempfile.TemporaryDirectory() as tmp:
        dirs = [write_sources(v, a.op, Path(tmp) / v.name) for v in variants]
        # Each build is an nvcc subprocess: threads overlap them (and the shipped one's).
        with ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
            shipped = pool.submit(module.extension)
            exts = list(pool.map(build, variants, dirs))
            shipped.result()
    impls = ([base] + [known[n] for n in peers]
             + [variant_implementation(base, module, v, e) for v, e in zip(variants, exts)])
    dev = torch.device("cuda")
    ceilings = roofline.load_ceilings(dev)
    if ceilings.copy_gbps is None:
        ceilings = roofline.calibrate(dev)
    opts = RunOptions(device=dev, golden_device=dev, repeats=a.repeats, l2_flush=a.l2_flush,
                      warmup_s=a.warmup_ms / 1e3)
    driver = Driver(opts, results.environment(dev, a.profile), ceilings)
    writer, rows = results.ResultsWriter(a.output), Rows()
    driver.run(Plan.of(cases, lambda op: impls, {a.op: spec}),
               Tee(writer, rows, Each(_print_row)))
    writer.close()
    print(summary.render(rows, footer=[f"results: {a.output}"]))
    return 0


if __name__ == "__main__":
    run_script(main, "kernel_variants")
