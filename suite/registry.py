"""Registry of ops and implementations.

Ops register an `OpSpec` with `register_op`; implementations register with the
`@implementation(...)` decorator (tritonbench style). `discover()` imports every module
under the `ops` and `kernels` packages, so adding a file is enough: no central list.
An implementation can also come from outside as `OP=package.module:object`, bound to
its op; `resolve` finds any of them again by name or origin in another process.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import pkgutil
from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional

from bwd_suite.suite.errors import SuiteInputError, did_you_mean
from bwd_suite.suite.opspec import OpSpec

DEVICE_TYPES = ("cpu", "cuda")  # prefixes of device-specific known-failure patterns
KINDS = ("reference", "native", "ours", "vendor", "mutant", "external")

_OPS: dict[str, OpSpec] = {}
_IMPLS: dict[tuple[str, str], "Implementation"] = {}
_discovered = False
_PACKAGES = ("bwd_suite.ops", "bwd_suite.kernels")  # imported by discover()


class Unsupported(Exception):
    """Raised by an implementation (or its `prepare`) that cannot take a case it could not
    refuse ahead through `supports`: a library that decides at call time (PyTorch's pinned
    attention backends raise "No available kernel" and warn why). The item is
    `unsupported` with this reason, not an error."""


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
    # compiles what the implementation needs ahead of the run (`python -m bwd_suite prebuild`)
    build: Optional[Callable[[], object]] = None
    # case-id substring -> why this implementation is known to fail those cases (a vendor's
    # measured accuracy limit, say). pytest marks them xfail(strict): the suite still
    # reports the failure, and a fix shows up as an unexpected pass.
    known_failures: Mapping[str, str] = field(default_factory=dict)
    # params -> why it is known to fail, or None: for failures that case ids cannot name
    # (cases the fuzzer draws), e.g. a property of the data rather than a case file's sweep
    known_failure_when: Optional[Callable[[Mapping], Optional[str]]] = None
    # for one loaded from outside (--impl): the text that resolves it again in another
    # process, e.g. "softmax=pkg.mod:fn" (`resolve`); "" for a registered one
    origin: str = ""
    # output name -> input name: the implementation writes that output into the input's
    # storage (Liger's cross entropy writes dlogits into the logits). The harness hands it
    # a copy of the input, outside the timed region, with out[output] the same
    # tensor; docs/contract.md#outputs-written-into-an-input
    in_place: Mapping[str, str] = field(default_factory=dict)
    # two phases (docs/contract.md#two-phase-implementations): prepare(**inputs, **attrs)
    # runs untimed (a forward saving what the backward needs) and returns `saved`; the
    # timed call is then fn(**inputs, **attrs, saved=saved), which returns its outputs as
    # a dict of tensors it allocated, fresh each call, instead of writing into `out`
    prepare: Optional[Callable] = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"implementation {self.name}: kind {self.kind!r} not in {KINDS}")
        if not self.enabled and not self.disabled_reason:
            raise ValueError(f"implementation {self.name}: disabled without a reason")
        if self.prepare is not None and self.in_place:
            raise ValueError(f"implementation {self.name}: a two-phase implementation returns "
                             f"its outputs, so none can be written into an input")

    @property
    def key(self) -> str:
        return self.name

    def known_failure(self, case_id: str, device: Optional[str] = None,
                      params: Optional[Mapping] = None) -> Optional[str]:
        """Why this implementation is expected to fail `case_id` (of `params`) on `device` (a
        device type), or None. A pattern `cpu:substring` (or `cuda:...`) holds on that
        device only; one ending in `$` must end the id (a case whose id others extend);
        `known_failure_when` judges the params."""
        if params is not None and self.known_failure_when is not None:
            why = self.known_failure_when(params)
            if why:
                return why
        for pattern, why in self.known_failures.items():
            where, sep, text = pattern.partition(":")
            if not (sep and where in DEVICE_TYPES):
                text = pattern
            elif device != where:
                continue
            if case_id.endswith(text[:-1]) if text.endswith("$") else text in case_id:
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
    for pkg_name in _PACKAGES:
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


_PROBED: dict = {}  # module name -> why importing it kills a process ("" when it does not)


def _probe_import(mod_name: str, spec: str) -> None:
    """Import `mod_name` first in a child process: a module that segfaults or calls
    os._exit while being imported would take the run down silently with it. Its
    exceptions are left to the real import, which words them."""
    import subprocess
    import sys

    if mod_name in sys.modules:
        return
    if mod_name not in _PROBED:
        code = ("import importlib, sys\n"
                "try:\n    importlib.import_module(sys.argv[1])\n"
                "except BaseException:\n    sys.stdout.write('raised')\n"
                "else:\n    sys.stdout.write('imported')\n")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p or os.getcwd() for p in sys.path))
        try:
            proc = subprocess.run([sys.executable, "-c", code, mod_name], capture_output=True,
                                  text=True, timeout=600, env=env)
        except subprocess.TimeoutExpired:
            _PROBED[mod_name] = "still importing after 600 s"
        else:
            _PROBED[mod_name] = _probe_words(proc)
    if _PROBED[mod_name]:
        raise SuiteInputError("--impl", f"{spec!r} cannot be imported: importing "
                                        f"{mod_name} {_PROBED[mod_name]}")


def _probe_words(proc) -> str:
    """How a probe's import ended, "" when it returned (or raised: the real import says)."""
    import signal

    tail = " | ".join(ln for ln in proc.stderr.strip().splitlines()[-3:] if ln.strip())
    said = f" (last output: {tail[:300]})" if tail else ""
    if proc.returncode < 0:
        try:
            name = signal.Signals(-proc.returncode).name
        except ValueError:
            name = f"signal {-proc.returncode}"
        return f"kills the process with {name}{said}"
    if proc.returncode == 0 and proc.stdout in ("imported", "raised"):
        return ""  # the real import words an exception
    return f"ends the process (exit status {proc.returncode} before the import returned){said}"


def _import_object(obj_spec: str, spec: str, probe: bool = True):
    """The object `module:attr` names; any failure of the import is bad input, one line.
    `probe`: import it in a child process first (the run's process; a worker's own
    failures are its run's to record)."""
    mod_name, _, attr = obj_spec.partition(":")
    if not mod_name or not attr:
        raise SuiteInputError("--impl", f"{spec!r}: expected [OP=]package.module:object")
    if probe:
        _probe_import(mod_name, spec)
    try:
        module = importlib.import_module(mod_name)
    except ImportError as e:
        raise SuiteInputError("--impl", f"{spec!r} cannot be imported: {_one_line(e)}") from None
    except (Exception, SystemExit) as e:  # noqa: BLE001 - the module's own failure
        raise SuiteInputError("--impl", f"{spec!r} cannot be imported: its module raised "
                                        f"{type(e).__name__}: {_one_line(e)}") from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise SuiteInputError("--impl", f"{spec!r} cannot be imported: module {mod_name!r} "
                                        f"has no {attr!r}") from None


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())


def external_implementation(spec: str, default_op: Optional[str] = None,
                            probe: bool = True) -> Implementation:
    """`[OP=]package.module:object`, a decorated function (of its own op) or a plain
    callable (of OP, else of `default_op`, the --op), with the text that finds it again in
    another process as its `origin`; refused when it cannot take the op's inputs as
    keywords. `probe`: see _import_object."""
    head, _, tail = spec.partition(":")
    op_name, eq, mod_name = head.rpartition("=")
    if eq and op_name not in ops():
        raise SuiteInputError("--impl", f"{spec!r}: " + did_you_mean(op_name, ops()))
    obj_spec = f"{mod_name}:{tail}"
    obj = _import_object(obj_spec, spec, probe)
    registered = getattr(obj, "implementation", None)
    if isinstance(registered, Implementation):
        if op_name and registered.op != op_name:
            raise SuiteInputError("--impl", f"{spec!r}: {obj_spec} is registered as an "
                                            f"implementation of {registered.op}, not {op_name}")
        impl = dataclasses.replace(registered, origin=f"{registered.op}={obj_spec}")
    elif not callable(obj):
        raise SuiteInputError("--impl", f"{spec!r} is not callable")
    else:
        op_name = op_name or default_op
        if not op_name:
            raise SuiteInputError("--impl", f"{spec!r} does not say which op it implements: "
                                            f"write OP={spec} (ops: {', '.join(ops())}) or "
                                            f"give --op")
        # an object with a callable `prepare` attribute is a two-phase implementation
        prepare = getattr(obj, "prepare", None)
        impl = Implementation(op=op_name, name=obj_spec, fn=obj, kind="external",
                              deterministic=False, doc=(obj.__doc__ or "").strip()[:80],
                              origin=f"{op_name}={obj_spec}",
                              prepare=prepare if callable(prepare) else None)
    if default_op and impl.op != default_op:
        raise SuiteInputError("--impl", f"{spec!r} implements {impl.op}, not --op {default_op}")
    _check_takes_inputs(impl, spec)
    return impl


def _check_takes_inputs(impl: Implementation, text: str) -> None:
    """Refuse a callable whose signature cannot take its op's inputs, attributes and `out`
    as keywords (another op's function, say): every item would raise TypeError."""
    import inspect

    import torch

    spec = ops()[impl.op]
    inputs = spec.make_inputs(spec.params.defaults(), 0, torch.device("cpu"))
    names = [*inputs.tensors, *inputs.attrs]
    for what, fn, extra in (("", impl.fn, "saved" if impl.prepare else "out"),
                            (".prepare", impl.prepare, None)):
        if fn is None:
            continue
        keywords = names + ([extra] if extra else [])
        try:
            signature = inspect.signature(fn)
        except (TypeError, ValueError):  # a builtin or an extension's function: cannot tell
            continue
        try:
            signature.bind(**dict.fromkeys(keywords))
        except TypeError as e:
            raise SuiteInputError("--impl", f"{text!r}{what} cannot take the inputs of "
                                            f"{impl.op} as keywords ({', '.join(keywords)}): "
                                            f"{e}") from None


def select_implementations(op_name: str, names: Optional[list], include_mutants=False,
                           default_op: Optional[str] = None) -> list[Implementation]:
    """The implementations of `op_name` named in `names` (when None: the project's own, all
    but mutants, and no "external" one a module outside kernels/ and ops/ registered by
    being imported: those run when named); an external one (`[OP=]module:object`) only
    where it is of `op_name`. `default_op` (the --op) is the op of a plain callable that
    does not say."""
    known = {i.name: i for i in implementations(op_name)}
    if not names:
        return [i for i in known.values()
                if (include_mutants or i.kind != "mutant") and i.kind != "external"]
    chosen = []
    for n in names:
        if ":" in n:
            impl = external_implementation(n, default_op)
            if impl.op == op_name:  # never called on another op's cases
                chosen.append(impl)
        elif n in known:
            chosen.append(known[n])
        elif not any(n in {i.name for i in implementations(o)} for o in ops()):
            raise SuiteInputError("--impl", did_you_mean(n, {i.name for i in implementations()}))
    return chosen


def resolve(op_name: str, ref: str) -> Implementation:
    """The implementation of `op_name` that `ref` (an `origin` or a registered name) finds,
    for a process other than the one that selected it (a worker)."""
    if ":" in ref:
        impl = external_implementation(ref, op_name, probe=False)
    else:
        impl = next((i for i in implementations(op_name) if i.name == ref), None)
    if impl is None:
        raise SuiteInputError("--impl", f"{op_name} has no implementation {ref!r}")
    return impl


def resolvable(impl: Implementation) -> bool:
    """Whether `resolve` finds `impl` in a fresh process: it came from outside with its
    origin, or it is the registered one of a module that `discover` imports."""
    if impl.origin:
        return True
    module = getattr(impl.fn, "__module__", None) or ""
    return _IMPLS.get((impl.op, impl.name)) is impl \
        and any(module == p or module.startswith(p + ".") for p in _PACKAGES)
