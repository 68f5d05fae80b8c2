"""The ops' import graph, read from the source with `ast` (every import, those inside
functions too): ops, golden and the diagnosis import one another without a circle, and
kernels depend on the ops' public names only, never on a private helper or a diagnosis
module. A circle broken by an import inside a function still counts as one."""

import ast
import importlib.util
from pathlib import Path

# the packages whose modules form the graph held free of circles
GRAPH = ("bwd_suite.ops", "bwd_suite.golden", "bwd_suite.suite.diagnosis")
KERNELS = "bwd_suite.kernels"
OPS = "bwd_suite.ops"


def modules(package: str) -> dict:
    """{module name: source path} of a package and every module below it (a plain module
    is itself alone); folders without an __init__.py (csrc/) are no packages."""
    spec = importlib.util.find_spec(package)
    if spec.submodule_search_locations is None:
        return {package: Path(spec.origin)}
    found = {}
    for root in map(Path, spec.submodule_search_locations):
        for path in sorted(root.rglob("*.py")):
            rel = path.relative_to(root)
            if not all((root / Path(*rel.parts[:i]) / "__init__.py").is_file()
                       for i in range(len(rel.parts))):
                continue
            parts = rel.with_suffix("").parts
            name = ".".join((package,) + (parts[:-1] if parts[-1] == "__init__" else parts))
            found[name] = path
    return found


def imports(name: str, path: Path, known: set):
    """(imported module, the names taken from it or None, line) for every import of the
    module: a `from X import Y` whose Y is a module of `known` imports X.Y."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, None, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = name.split(".") if is_package else name.split(".")[:-1]
                up = here[:len(here) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            taken = []
            for a in node.names:
                if f"{base}.{a.name}" in known:
                    yield f"{base}.{a.name}", None, node.lineno
                else:
                    taken.append(a.name)
            if taken:
                yield base, tuple(taken), node.lineno


def graph() -> dict:
    """{module: {imported module: (path, line)}} over GRAPH's modules. Importing a.b.c runs
    the packages a and a.b first: an edge to each that is not the importer's own package."""
    paths = {}
    for package in GRAPH:
        paths.update(modules(package))
    edges = {m: {} for m in paths}
    for m, path in paths.items():
        own = {".".join(m.split(".")[:i]) for i in range(1, m.count(".") + 1)}
        for target, _, line in imports(m, path, set(paths)):
            parts = target.split(".")
            for i in range(1, len(parts) + 1):
                t = ".".join(parts[:i])
                if t in paths and t not in own and t != m:
                    edges[m].setdefault(t, (path, line))
    return edges


def find_cycle(edges: dict):
    """One circle as a list of modules (its first repeated at the end), or None."""
    state, stack = {}, []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for t in sorted(edges[m]):
            if state.get(t) == "open":
                return stack[stack.index(t):] + [t]
            if t not in state:
                found = visit(t)
                if found:
                    return found
        stack.pop()
        state[m] = "done"
        return None

    for m in sorted(edges):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return None


def test_ops_golden_and_diagnosis_import_without_a_circle():
    edges = graph()
    assert any(m.endswith("_diagnosis") for m in edges), "no op diagnosis module found"
    cycle = find_cycle(edges)
    if cycle:
        steps = [f"{a} -> {b} ({edges[a][b][0]}:{edges[a][b][1]})"
                 for a, b in zip(cycle, cycle[1:])]
        raise AssertionError("import circle:\n  " + "\n  ".join(steps))


def test_kernels_use_public_names_of_ops_only():
    """No kernels module (mutants included) imports a `_` name of an ops module, an ops
    diagnosis module, or reaches a `_` attribute through an ops module it imported."""
    ops = modules(OPS)
    known = set(ops)
    bad = []
    for m, path in modules(KERNELS).items():
        tree = ast.parse(path.read_text(), str(path))
        bound = set()  # local names of ops modules: `import ... as x`, `from ops import x`
        for target, taken, line in imports(m, path, known):
            if not (target == OPS or target.startswith(OPS + ".")):
                continue
            where = f"{path}:{line}: {target}"
            if target.endswith("_diagnosis"):
                bad.append(f"{where} (a diagnosis module)")
            private = [n for n in taken or () if n.startswith("_")]
            if private:
                bad.append(f"{where} imports {', '.join(private)}")
            if taken is None and any(p.startswith("_") for p in target.split(".")[2:]):
                bad.append(f"{where} (a private module)")
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(OPS):
                bound.update(a.asname or a.name for a in node.names
                             if f"{node.module}.{a.name}" in known)
            elif isinstance(node, ast.Import):
                bound.update(a.asname for a in node.names
                             if a.asname and a.name.startswith(OPS + "."))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id in bound and node.attr.startswith("_"):
                bad.append(f"{path}:{node.lineno}: {node.value.id}.{node.attr}")
    assert not bad, "kernels depend on ops internals:\n  " + "\n  ".join(bad)


def test_the_walk_sees_imports_inside_functions(tmp_path):
    """The circle search reads function-level imports and resolves relative ones."""
    src = tmp_path / "mod.py"
    src.write_text("def f():\n    from .sibling import g\n    import bwd_suite.ops.x\n")
    found = list(imports("bwd_suite.ops.mod", src, {"bwd_suite.ops.x"}))
    assert ("bwd_suite.ops.sibling", ("g",), 2) in found
    assert ("bwd_suite.ops.x", None, 3) in found
    assert find_cycle({"a": {"b": 0}, "b": {"a": 0}}) == ["a", "b", "a"]
    assert find_cycle({"a": {"b": 0}, "b": {}}) is None
