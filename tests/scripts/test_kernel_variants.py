"""scripts/kernel_variants.py on any machine: the variants file is checked with errors that
name the variant and file, edits apply exactly once to a copy of the op's sources (never to
kernels/ itself), and a variant implementation runs the shipped adapter on the variant's
extension, restoring the shipped one after every call. (Building and timing need a GPU.)"""

import difflib
import importlib.util
import sys
import types
from pathlib import Path

import pytest

from bwd_suite.suite import registry
from bwd_suite.suite.errors import SuiteInputError

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def kv():
    spec = importlib.util.spec_from_file_location("kernel_variants",
                                                  ROOT / "scripts" / "kernel_variants.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["kernel_variants"] = mod  # its dataclass looks its module up there
    try:
        spec.loader.exec_module(mod)
        yield mod
    finally:
        sys.modules.pop("kernel_variants", None)


OLD = "constexpr int kWarpRows = 4;"


def _toml(tmp_path, text):
    p = tmp_path / "v.toml"
    p.write_text(text)
    return p


def _rows8(tmp_path):
    """A file of one variant, `rows8`: 8 warp rows a block instead of 4."""
    return _toml(tmp_path, f'''
[[variant]]
name = "rows8"
[[variant.edit]]
file = "softmax/csrc/softmax_bwd_launchers.h"
old = "{OLD}"
new = "constexpr int kWarpRows = 8;"
''')


def test_edits_apply_once_to_a_copy(kv, tmp_path):
    v = kv.load_variants(_toml(tmp_path, f'''
[[variant]]
name = "rows8"
why = "8 rows a block"
[[variant.edit]]
file = "softmax/csrc/softmax_bwd_launchers.h"
old = "{OLD}"
new = "constexpr int kWarpRows = 8;"
'''))
    assert [(x.name, x.why) for x in v] == [("rows8", "8 rows a block")]
    csrc = kv.write_sources(v[0], "softmax", tmp_path / "out")
    text = (csrc / "softmax_bwd_launchers.h").read_text()
    assert "constexpr int kWarpRows = 8;" in text and OLD not in text
    assert (tmp_path / "out/kernels/common/csrc/convert.cuh").is_file()  # includes resolve
    assert OLD in (ROOT / "kernels/softmax/csrc/softmax_bwd_launchers.h").read_text()  # shipped intact


@pytest.mark.parametrize("old,match", [("no such text", "occurs 0 times"),
                                       ("#include", "occurs [0-9]+ times")])
def test_edit_must_match_exactly_once(kv, tmp_path, old, match):
    v = kv.Variant("x", "", [("softmax/csrc/softmax_bwd_launchers.h", old, "y")])
    with pytest.raises(SuiteInputError, match=match):
        kv.write_sources(v, "softmax", tmp_path / "out")


def test_edit_outside_the_copied_sources_is_refused(kv, tmp_path):
    v = kv.Variant("x", "", [("layer_norm/csrc/layer_norm_bwd_rows.cu", "a", "b")])
    with pytest.raises(SuiteInputError, match="not a file of kernels/softmax/csrc"):
        kv.write_sources(v, "softmax", tmp_path / "out")


@pytest.mark.parametrize("text,match", [
    ("", "defines no"),
    ('[[variant]]\nname = "a-b"\n[[variant.edit]]\nfile="f"\nold="o"\nnew="n"\n', "name 'a-b'"),
    ('[[variant]]\nname = "a"\n', "has no"),
    ('[[variant]]\nname = "a"\n[[variant.edit]]\nfile="f"\n', "missing"),
    ("[[variant", "cannot read"),
])
def test_bad_variant_files_name_the_problem(kv, tmp_path, text, match):
    with pytest.raises(SuiteInputError, match=match):
        kv.load_variants(_toml(tmp_path, text))


def test_variant_runs_the_adapter_on_its_extension(kv):
    shipped, variant_ext = object(), object()
    module = types.SimpleNamespace(extension=lambda: shipped)
    seen = []
    base = registry.Implementation(op="softmax", name="cuda", kind="ours",
                                   fn=lambda **kw: seen.append(module.extension()))
    impl = kv.variant_implementation(base, module, kv.Variant("v1", "why", []), variant_ext)
    assert (impl.name, impl.doc, impl.kind) == ("cuda+v1", "why", "ours")
    impl.fn(y=1)
    assert seen == [variant_ext] and module.extension() is shipped
    with pytest.raises(ZeroDivisionError):  # restored even when the call raises
        kv.variant_implementation(registry.Implementation(
            op="softmax", name="cuda", kind="ours", fn=lambda **kw: 1 / 0),
            module, kv.Variant("v2", "", []), variant_ext).fn()
    assert module.extension() is shipped


def test_patch_variant_applies_to_the_copy_and_bad_patches_are_refused(kv, tmp_path):
    """A patch variant is applied to the copy (never to kernels/), and a hunk that does not
    fit is refused naming the variant."""
    rel = "kernels/softmax/csrc/softmax_bwd_launchers.h"
    shipped = (ROOT / rel).read_text()
    changed = shipped.replace(OLD, "constexpr int kWarpRows = 8;")
    diff = "".join(difflib.unified_diff(shipped.splitlines(True), changed.splitlines(True),
                                        f"a/{rel}", f"b/{rel}"))
    (tmp_path / "rows8.patch").write_text(f"# a comment line first\ndiff --git a/{rel} b/{rel}\n{diff}")
    (tmp_path / "v.toml").write_text('[[variant]]\nname = "rows8"\npatch = "rows8.patch"\n')
    v, = kv.load_variants(tmp_path / "v.toml")
    csrc = kv.write_sources(v, "softmax", tmp_path / "ok")
    assert "constexpr int kWarpRows = 8;" in (csrc / "softmax_bwd_launchers.h").read_text()
    assert OLD in (ROOT / rel).read_text()  # shipped intact
    bad = tmp_path / "bad.patch"
    bad.write_text((tmp_path / "rows8.patch").read_text().replace(OLD, "constexpr int kNoSuch = 4;"))
    with pytest.raises(SuiteInputError, match="rows8.*does not apply"):
        kv.write_sources(kv.Variant("rows8", "", [], bad), "softmax", tmp_path / "bad")
    with pytest.raises(SuiteInputError, match="changes no file of kernels/layer_norm"):
        kv.write_sources(v, "layer_norm", tmp_path / "other")  # another op's patch
    with pytest.raises(SuiteInputError, match="patch .*missing.patch is not a file"):
        kv.load_variants(_toml(tmp_path, '[[variant]]\nname = "a"\npatch = "missing.patch"\n'))


VARIANT_FILES = sorted((ROOT / "benchmarks" / "variants").glob("*.toml")) + sorted(
    (ROOT / "tests" / "data" / "variants").glob("*.toml"))


@pytest.mark.parametrize("path", VARIANT_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_variant_files_load(kv, path):
    """Every open variants file (benchmarks/variants/, when there is one) and the two
    archived examples in tests/data/variants/ (text edits; a patch file) load and their
    patches exist (whether a patch still applies depends on the commit it names: the GPU
    run says)."""
    variants = kv.load_variants(path)
    assert variants and all(v.patch is None or v.patch.is_file() for v in variants)


def test_a_negative_warmup_is_refused_before_any_build(kv, tmp_path):
    with pytest.raises(SuiteInputError, match=r"^--warmup-ms: must be at least 0, got -1$"):
        kv.main(["--op", "softmax", "--variants", str(_rows8(tmp_path)), "--warmup-ms", "-1"])


def test_peers_must_be_other_implementations_of_the_op(kv, tmp_path):
    toml = _rows8(tmp_path)
    # checked before any build or device: the error names the option and the op's names
    for peers, bad in (("liger,nope", "nope"), ("cuda", "cuda")):
        with pytest.raises(SuiteInputError) as err:
            kv.main(["--op", "softmax", "--variants", str(toml), "--with", peers])
        msg = str(err.value)
        assert msg.startswith(f"--with: '{bad}' is not one of: ") and "torch_ref" in msg
        assert "cuda," not in msg and msg.endswith("(the other implementations of softmax)")


def test_twin_is_the_shipped_sources_timed_last(kv, tmp_path):
    toml = _rows8(tmp_path)
    assert [v.name for v in kv.planned_variants(toml, twin=False)] == ["rows8"]
    both = kv.planned_variants(toml, twin=True)
    assert [v.name for v in both] == ["rows8", "twin"]  # last: after every variant
    assert [v.name for v in kv.planned_variants(None, twin=True)] == ["twin"]
    # the twin's sources are the shipped ones, byte for byte
    csrc = kv.write_sources(both[1], "softmax", tmp_path / "twin")
    for f in (ROOT / "kernels" / "softmax" / "csrc").iterdir():
        assert (csrc / f.name).read_bytes() == f.read_bytes()
    with pytest.raises(SuiteInputError, match="--twin alone"):
        kv.planned_variants(None, twin=False)
    clash = _toml(tmp_path, toml.read_text().replace('"rows8"', '"twin"'))
    with pytest.raises(SuiteInputError, match="--twin"):
        kv.planned_variants(clash, twin=True)
