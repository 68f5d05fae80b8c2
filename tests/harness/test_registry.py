"""Implementations bound to their op (suite/registry.py): `OP=module:object`, the
decorator's op, --op for a plain callable; `origin` and `resolve`, which find an
implementation again in another process."""

import subprocess
import sys
from pathlib import Path

import pytest

from bwd_suite.suite import registry
from bwd_suite.suite.errors import SuiteInputError

ROOT = Path(__file__).resolve().parents[2]


def _error(*args, **kw) -> SuiteInputError:
    with pytest.raises(SuiteInputError) as info:
        registry.select_implementations(*args, **kw)
    assert info.value.where == "--impl" and "\n" not in str(info.value)
    return info.value


def test_op_prefix_binds_a_plain_callable():
    (impl,) = registry.select_implementations("softmax", ["softmax=tests.helpers:raising"])
    assert (impl.op, impl.name, impl.kind) == ("softmax", "tests.helpers:raising", "external")
    assert impl.origin == "softmax=tests.helpers:raising"
    assert registry.select_implementations("layer_norm", ["softmax=tests.helpers:raising"]) == []


def test_plain_callable_needs_an_op():
    e = _error("softmax", ["tests.helpers:raising"])
    assert "does not say which op" in e.what and "write OP=tests.helpers:raising" in e.what
    (impl,) = registry.select_implementations("softmax", ["tests.helpers:raising"],
                                              default_op="softmax")
    assert impl.op == "softmax" and impl.origin == "softmax=tests.helpers:raising"


def test_decorated_object_keeps_its_op_and_registration():
    (impl,) = registry.select_implementations("layer_norm", ["tests.helpers:layer_norm_only"])
    assert (impl.op, impl.name) == ("layer_norm", "tests_layer_norm_only")
    assert impl.origin == "layer_norm=tests.helpers:layer_norm_only"
    for op in ("softmax", "causal_conv1d"):
        assert registry.select_implementations(op, ["tests.helpers:layer_norm_only"]) == []


@pytest.mark.parametrize("spec, default_op, what", [
    ("softmax=tests.helpers:layer_norm_only", None,
     "registered as an implementation of layer_norm, not softmax"),
    ("softmx=tests.helpers:raising", None, "'softmx' is not one of: adamw, attention, causal_conv1d"),
    ("=tests.helpers:raising", None, "'' is not one of"),
    ("tests.helpers:layer_norm_only", "softmax", "implements layer_norm, not --op softmax"),
    ("layer_norm=tests.helpers:raising", "softmax", "implements layer_norm, not --op softmax"),
    ("tests.helpers:", None, "expected [OP=]package.module:object"),
    ("tests.helpers:no_such_object", "softmax", "has no 'no_such_object'"),
], ids=["decorated-mismatch", "unknown-op", "empty-op", "decorated-vs-op",
        "prefix-vs-op", "no-object", "missing-object"])
def test_refused_specs(spec, default_op, what):
    e = _error("softmax", [spec], default_op=default_op)
    assert what in e.what, e.what


def test_resolve_finds_registered_and_external_implementations_again():
    assert registry.resolve("softmax", "torch_ref") is next(
        i for i in registry.implementations("softmax") if i.name == "torch_ref")
    for ref in ("softmax=tests.helpers:raising", "layer_norm=tests.helpers:layer_norm_only"):
        op = ref.split("=")[0]
        (chosen,) = registry.select_implementations(op, [ref])
        again = registry.resolve(op, chosen.origin or chosen.name)
        assert (again.op, again.name, again.fn, again.origin) == \
            (chosen.op, chosen.name, chosen.fn, chosen.origin)
    with pytest.raises(SuiteInputError, match="softmax has no implementation 'nope'"):
        registry.resolve("softmax", "nope")
    with pytest.raises(SuiteInputError, match="not --op softmax"):
        registry.resolve("softmax", "layer_norm=tests.helpers:layer_norm_only")


def test_resolve_in_a_fresh_process():
    code = ("from bwd_suite.suite import registry; i = registry.resolve('layer_norm', "
            "'layer_norm=tests.helpers:layer_norm_only'); print(i.op, i.name, i.origin)")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert r.stdout.split() == ["layer_norm", "tests_layer_norm_only",
                                "layer_norm=tests.helpers:layer_norm_only"], r.stderr


def test_resolvable():
    (external,) = registry.select_implementations("softmax", ["softmax=tests.helpers:raising"])
    registered = registry.resolve("softmax", "torch_ref")
    assert registry.resolvable(external) and registry.resolvable(registered)
    import tests.helpers  # noqa: F401 - registers tests_layer_norm_only by its decorator

    by_name = registry.resolve("layer_norm", "tests_layer_norm_only")
    assert not by_name.origin and not registry.resolvable(by_name)  # not under kernels/
    local = registry.Implementation(op="softmax", name="torch_ref", fn=registered.fn)
    assert not registry.resolvable(local)  # not the registered object


def test_an_imported_external_implementation_runs_only_when_named():
    """tests.helpers registers external implementations when imported; a run without
    --impl must not pick them up (its workers could not find them), --impl still can."""
    import tests.helpers  # noqa: F401 - registers tests_known_bad
    assert "tests_known_bad" not in {
        i.name for i in registry.select_implementations("causal_conv1d", None)}
    assert [i.name for i in registry.select_implementations(
        "causal_conv1d", ["tests_known_bad"])] == ["tests_known_bad"]
