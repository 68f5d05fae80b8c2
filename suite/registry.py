"""Registry of ops and implementations.

Ops register an `OpSpec` with `register_op`; implementations register with the
`@implementation(...)` decorator (tritonbench style). `discover()` imports every module
under the `ops` and `kernels` packages, so adding a file is enough: no central list.
An implementation can also come from outside as `package.module:object`.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional

from suite.errors import SuiteInputError, did_you_mean
from suite.opspec import OpSpec

KINDS = ("reference", "native", "ours", "vendor", "mutant", "external")

_OPS: dict[str, OpSpec] = {}
_IMPLS: dict[tuple[str, str], "Implementation"] = {}
_discovered = False


@dataclass(frozen=True)
class Implementation:
    op: str
    name: str
    fn: Callable
    kind: str = "reference"
    # devices it runs on ("cpu", "cuda")
    devices: tuple = ("cpu", "cuda")
    # params -> reason it cannot run this case, or None
    supports: Callable[[Mapping], Optional[str]] = field(default=lambda params: None)
    # claims bitwise-reproducible outputs; then anything but bitwise is a failure
    deterministic: bool = True
    # False with a reason when a dependency is missing (vendor package, CUDA build)
    enabled: bool = True
    disabled_reason: str = ""
    version: str = ""
    doc: str = ""
    # compiles what the implementation needs ahead of the run (`python -m suite prebuild`)
    build: Optional[Callable[[], object]] = None
    # case-id substring -> why this implementation is known to fail those cases (a vendor's
    # measured accuracy limit, say). pytest marks them xfail(strict): the suite still
    # reports the failure, and a fix shows up as an unexpected pass.
    known_failures: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"implementation {self.name}: kind {self.kind!r} not in {KINDS}")
        if not self.enabled and not self.disabled_reason:
            raise ValueError(f"implementation {self.name}: disabled without a reason")

    @property
    def key(self) -> str:
        return self.name

    def known_failure(self, case_id: str) -> Optional[str]:
        """Why this implementation is expected to fail `case_id`, or None."""
        for pattern, why in self.known_failures.items():
            if pattern in case_id:
                return why
        return None

    def unsupported_reason(self, params: Mapping, device: str) -> Optional[str]:
        """Why this implementation cannot run the case on `device`, or None."""
        if not self.enabled:
            return self.disabled_reason
        if device not in self.devices:
            return f"runs on {', '.join(self.devices)} only, not {device}"
        return self.supports(params)


def register_op(spec: OpSpec) -> OpSpec:
    if spec.name in _OPS and _OPS[spec.name] is not spec:
        raise ValueError(f"op {spec.name} registered twice")
    _OPS[spec.name] = spec
    return spec


def implementation(op: str, name: str, **kw) -> Callable:
    """Decorator: register `fn` as implementation `name` of `op`."""

    def wrap(fn):
        doc = kw.pop("doc", None) or (fn.__doc__ or "").strip().split("\n")[0]
        impl = Implementation(op=op, name=name, fn=fn, doc=doc, **kw)
        if (op, name) in _IMPLS:
            raise ValueError(f"implementation {op}/{name} registered twice")
        _IMPLS[(op, name)] = impl
        fn.implementation = impl
        return fn

    return wrap


def discover() -> None:
    """Import every module under `ops` and `kernels` once, which registers them."""
    global _discovered
    if _discovered:
        return
    _discovered = True
    for pkg_name in ("ops", "kernels"):
        pkg = importlib.import_module(pkg_name)
        for info in pkgutil.walk_packages(pkg.__path__, prefix=pkg_name + "."):
            importlib.import_module(info.name)


def ops() -> dict[str, OpSpec]:
    discover()
    return dict(sorted(_OPS.items()))


def op(name: str, where: str = "op") -> OpSpec:
    all_ops = ops()
    if name not in all_ops:
        raise SuiteInputError(where, did_you_mean(name, all_ops))
    return all_ops[name]


def implementations(op_name: Optional[str] = None) -> list[Implementation]:
    discover()
    return [i for (o, _), i in sorted(_IMPLS.items()) if op_name in (None, o)]


def external_implementation(spec: str, op_name: str) -> Implementation:
    """`package.module:object`, either a decorated function or a plain callable."""
    mod_name, _, attr = spec.partition(":")
    if not attr:
        raise SuiteInputError("--impl", f"{spec!r}: expected package.module:object")
    try:
        obj = getattr(importlib.import_module(mod_name), attr)
    except (ImportError, AttributeError) as e:
        raise SuiteInputError("--impl", f"{spec!r} cannot be imported: {e}") from None
    impl = getattr(obj, "implementation", None)
    if isinstance(impl, Implementation):
        return impl
    if not callable(obj):
        raise SuiteInputError("--impl", f"{spec!r} is not callable")
    return Implementation(op=op_name, name=spec, fn=obj, kind="external",
                          deterministic=False, doc=(obj.__doc__ or "").strip()[:80])


def select_implementations(op_name: str, names: Optional[list], include_mutants=False):
    """The implementations of `op_name` named in `names` (all non-mutants when None)."""
    known = {i.name: i for i in implementations(op_name)}
    if not names:
        return [i for i in known.values() if include_mutants or i.kind != "mutant"]
    chosen = []
    for n in names:
        if ":" in n:
            impl = external_implementation(n, op_name)
            if impl.op == op_name:  # a decorated one runs on its own op's cases only
                chosen.append(impl)
        elif n in known:
            chosen.append(known[n])
        elif not any(n in {i.name for i in implementations(o)} for o in ops()):
            raise SuiteInputError("--impl", did_you_mean(n, {i.name for i in implementations()}))
    return chosen
