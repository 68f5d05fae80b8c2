"""The product's import graph, read from the sources (every import, those inside functions
too): no circle anywhere, the harness (suite/) imports no op, kernel, golden or report
module, the float64 references import nothing of ours but themselves, reports read results
only, and nothing imports our folders by their bare names (suite, kernels, ...): installed,
only `bwd_suite` is ours."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("suite", "ops", "golden", "kernels", "reports", "cases")
BARE = set(FOLDERS)


def _modules() -> dict:
    """bwd_suite.<folder>.<...> -> source path, for every module of the product."""
    found = {}
    for folder in FOLDERS + ("bwd_suite",):
        for path in (ROOT / folder).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if folder != "bwd_suite":
                parts.insert(0, "bwd_suite")
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _resolve(name: str):
    """The module an imported name lives in (a module, or the package that holds it)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(path: Path):
    """(imported dotted name, line) of every absolute import in a file."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from ((a.name, node.lineno) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module, node.lineno
            yield from ((f"{node.module}.{a.name}", node.lineno) for a in node.names)


def _graph() -> dict:
    edges = {m: set() for m in MODULES}
    for m, path in MODULES.items():
        for name, _ in _imports(path):
            target = _resolve(name)
            if target and target != m and not m.startswith(target + "."):
                edges[m].add(target)  # a package importing its own parent is no arrow
    return edges


def _cycles(edges: dict) -> list:
    """The strongly connected components of more than one module (Tarjan's)."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def _arrows(edges: dict, source: str, targets: tuple) -> list:
    return sorted((a, b) for a in edges for b in edges[a]
                  if a.split(".")[1] == source and b.split(".")[1] in targets)


def test_the_product_has_no_import_circle():
    assert not _cycles(_graph())


@pytest.mark.parametrize("source, forbidden", [
    ("suite", ("ops", "kernels", "golden", "reports")),
    ("golden", ("suite", "ops", "kernels", "reports")),
    ("reports", ("ops", "kernels", "golden")),
])
def test_the_layers_point_one_way(source, forbidden):
    assert not _arrows(_graph(), source, forbidden)


def test_nothing_imports_our_folders_by_their_bare_names():
    """`import kernels` would find Hugging Face's package where it is installed."""
    files = list(MODULES.values()) + sorted((ROOT / "tests").rglob("*.py")) \
        + sorted((ROOT / "scripts").rglob("*.py")) + [ROOT / "conftest.py"]
    bare = [f"{p.relative_to(ROOT)}:{line}: {name}" for p in files
            for name, line in _imports(p) if name.split(".")[0] in BARE]
    assert not bare


def test_the_check_sees_a_circle_and_a_wrong_arrow():
    edges = {"bwd_suite.suite.a": {"bwd_suite.suite.b"}, "bwd_suite.suite.b":
             {"bwd_suite.suite.a", "bwd_suite.reports.c"}, "bwd_suite.reports.c": set()}
    assert _cycles(edges) == [["bwd_suite.suite.a", "bwd_suite.suite.b"]]
    assert _arrows(edges, "suite", ("reports",)) == [("bwd_suite.suite.b",
                                                      "bwd_suite.reports.c")]
