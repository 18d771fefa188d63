"""The package's modules import one another without a cycle, and only at
the top of a module (a function-local import hides a cycle until the
function runs)."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "zero"


def _siblings(node):
    """Modules of the package that an import statement names."""
    if isinstance(node, ast.ImportFrom) and node.level == 1:
        if node.module:
            return [node.module.split(".")[0]]
        return [alias.name for alias in node.names]
    return []


def _imports():
    """module -> (siblings imported at module level, at function level)."""
    out = {}
    for path in PACKAGE.glob("*.py"):
        tree = ast.parse(path.read_text())
        top = [s for node in tree.body for s in _siblings(node)]
        nested = [s for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)
                  for inner in ast.walk(node) for s in _siblings(inner)]
        out[path.stem] = (set(top), set(nested))
    return out


def test_no_module_imports_the_package_inside_a_function():
    nested = {m: sorted(n) for m, (_, n) in _imports().items() if n}
    assert nested == {}


def test_the_import_graph_has_no_cycle():
    graph = {m: top | nested for m, (top, nested) in _imports().items()}
    state = {}

    def visit(m, path):
        if state.get(m) == "done":
            return
        assert state.get(m) != "open", "import cycle: " + " -> ".join(path + [m])
        state[m] = "open"
        for n in sorted(graph.get(m, ())):
            visit(n, path + [m])
        state[m] = "done"

    for m in sorted(graph):
        visit(m, [])
