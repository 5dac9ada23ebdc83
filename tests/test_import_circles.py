"""No import circles among the modules that render and serve an analysis (issue 41 item 2): ``reports/``, ``cli/``,
``app/`` and ``advisors/analysis/``. Every import is an edge, function-level ones too (``import`` inside a
function to defer its cost still ties the two modules together). The circle the issue named —
``reports.advice → reports.experiment → reports.analysis → reports.advice`` — and ``cli.advisors ↔ cli.compare``
were found here before the analysis moved into ``advisors.analysis``.
"""

from __future__ import annotations

import ast
import sys

from tests.test_import_direction import module_name, python_files

WATCHED = ("reports", "cli", "app", "advisors.analysis")


def import_graph(tops: tuple[str, ...]) -> dict[str, set[str]]:
    """Module → the project modules it imports (``from a.b import c`` is ``a.b.c`` when that is a module)."""
    files = {module_name(p)[0]: p for top in tops for p in python_files(top)}
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and not node.level and node.module:
                edges.update(f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in files else node.module
                             for a in node.names)
            elif isinstance(node, ast.Import):
                edges.update(a.name for a in node.names)
        graph[module] = {e for e in edges if e in files and e != module}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for v in sorted(graph):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return found


def test_no_circle_touches_the_analysis_or_what_renders_it() -> None:
    graph = import_graph(("app", "cli", "reports", "advisors", "profilers"))
    touching = [c for c in circles(graph) if any(m == w or m.startswith(w + ".") for m in c for w in WATCHED)]
    assert touching == []


def test_the_finder_sees_a_circle() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
