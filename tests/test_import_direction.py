"""Imports run one way: stepwise → app → cli → reports → advisors → profilers / sample_runs → stepwise_agent.

Every ``import`` in the packages is parsed (function-level and ``importlib.import_module("…")`` ones too) and an
edge from a package to one above it fails the test, naming the file and line. The two ``__main__`` modules are
the only exceptions: ``python -m advisors`` and ``python -m profilers`` are thin entry points into ``cli``.
``profilers`` and ``sample_runs`` sit side by side and tie to neither each other nor anything but the agent's
level: the sample workloads are a training project like a user's (the launcher runs them as it runs any script),
and the facts of a run never depend on which project it was. ``benchmarks`` may import any package but not
``tests``; no folder holds more than 20 modules.

No import circles between files either, inside a package or across packages on one level: a module that imports
another which imports it back, directly or through others. Imports inside functions count: deferring one keeps
Python from tripping over the circle at import time, but the two files still need each other, cannot be read,
tested or moved apart, and the circle is one edit from an import-time failure. ``from pkg import name`` counts as
an import of ``pkg.name`` when that is a module, else of ``pkg``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# Higher numbers sit above lower ones; packages on one level may import each other.
LEVEL = {
    "stepwise": 5,
    "app": 4,
    "cli": 3,
    "reports": 2,
    "advisors": 1,
    "profilers": 0,
    "sample_runs": 0,
    "stepwise_agent": -1,
}  # the in-process agent, below everything: it may import no project package
ENTRY_POINTS = {"advisors/__main__.py", "profilers/__main__.py"}
MAX_MODULES_PER_FOLDER = 20
#: Import circles being removed right now on other helpers' branches (issue 41 item 6). Each entry goes when its
#: branch lands: the test fails on an entry that no longer matches a circle exactly, so the list only shrinks.
ALLOWED_CIRCLES: frozenset[frozenset[str]] = frozenset()


def imported_names(tree: ast.AST, module: str, is_package: bool) -> list[tuple[int, str]]:
    """(line, dotted name) of every import in ``tree``, relative imports resolved against ``module``."""
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = module.split(".")
                base = parts[: len(parts) - node.level + (1 if is_package else 0)]
                out.append((node.lineno, ".".join(base + ([node.module] if node.module else []))))
            else:
                out.append((node.lineno, node.module or ""))
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            out.append((node.lineno, node.args[0].value))
    return out


def python_files(top: str) -> list[Path]:
    return sorted(p for p in (REPO / top).rglob("*.py") if "__pycache__" not in p.parts)


def module_name(path: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def violations(tops: dict[str, int]) -> list[str]:
    found = []
    for top, level in tops.items():
        for path in python_files(top):
            rel = path.relative_to(REPO).as_posix()
            if rel in ENTRY_POINTS:
                continue
            module, is_package = module_name(path)
            for line, name in imported_names(ast.parse(path.read_text(), rel), module, is_package):
                target = name.split(".")[0]
                if target in LEVEL and LEVEL[target] > level:
                    found.append(f"{rel}:{line} imports {name} ({top} sits below {target})")
    return found


#: packages of one level that must not import each other (either way)
APART = (("profilers", "sample_runs"),)


def import_graph(tops: tuple[str, ...] = tuple(LEVEL)) -> dict[str, dict[str, int]]:
    """Module → {module it imports: the first line that does}, over the project's modules only (each ``from pkg
    import name`` resolved to the module ``pkg.name`` when there is one)."""
    files = {module_name(p): p for top in tops for p in python_files(top)}
    modules = {name for name, _ in files}

    def target(dotted: str) -> str | None:
        parts = dotted.split(".")
        return next(
            (
                ".".join(parts[:i])
                for i in range(len(parts), 0, -1)
                if ".".join(parts[:i]) in modules
            ),
            None,
        )

    graph: dict[str, dict[str, int]] = {}
    for (module, is_package), path in files.items():
        if path.relative_to(REPO).as_posix() in ENTRY_POINTS:
            continue
        edges = graph.setdefault(module, {})
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            found: list[tuple[int, str]] = []
            if isinstance(node, ast.ImportFrom):
                [(line, base)] = imported_names(
                    ast.Module(body=[node], type_ignores=[]), module, is_package
                )
                found = [(line, f"{base}.{alias.name}") for alias in node.names]
            elif isinstance(node, (ast.Import, ast.Call)):
                found = imported_names(
                    ast.Module(
                        body=[ast.Expr(node)] if isinstance(node, ast.Call) else [node],
                        type_ignores=[],
                    ),
                    module,
                    is_package,
                )
            for line, dotted in found:
                t = target(dotted)
                if t is not None and t != module:
                    edges.setdefault(t, line)
    return graph


def circles(graph: dict[str, dict[str, int]]) -> list[frozenset[str]]:
    """The import circles of ``graph``: each set of modules that reach one another (Tarjan's strongly connected
    components, iteratively), those of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, {}))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, {})))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = set()
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.add(w)
                    if w == v:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def _described(circle: frozenset[str], graph: dict[str, dict[str, int]]) -> str:
    edges = [
        f"{a.replace('.', '/')}.py:{line} imports {b}"
        for a in sorted(circle)
        for b, line in sorted(graph[a].items())
        if b in circle
    ]
    return "; ".join(edges)


def test_no_import_circles() -> None:
    graph = import_graph()
    found = set(circles(graph))
    assert [_described(c, graph) for c in sorted(found - ALLOWED_CIRCLES, key=sorted)] == []
    assert (
        sorted(sorted(c) for c in ALLOWED_CIRCLES - found) == []
    )  # gone: take it off the allow-list


def test_the_checker_sees_a_circle_through_an_import_inside_a_function() -> None:
    graph = {
        "cli.advisors": {"cli.compare": 60},
        "cli.compare": {"cli.advisors": 96, "cli.job_views": 3},
        "cli.job_views": {},
        "a.x": {"a.y": 1},
        "a.y": {"a.z": 1},
        "a.z": {"a.x": 1},
    }
    assert sorted(sorted(c) for c in circles(graph)) == [
        ["a.x", "a.y", "a.z"],
        ["cli.advisors", "cli.compare"],
    ]
    source = "def f():\n    from cli.advisors import with_job_views\n"
    names = imported_names(ast.parse(source), "cli.compare", False)
    assert names == [(2, "cli.advisors")]


def test_no_package_imports_one_above_it() -> None:
    assert violations(LEVEL) == []


def ties(a: str, b: str) -> list[str]:
    """Every import between ``a`` and ``b``, either way, with its file and line."""
    found = []
    for top, other in ((a, b), (b, a)):
        for path in python_files(top):
            rel = path.relative_to(REPO).as_posix()
            module, is_package = module_name(path)
            for line, name in imported_names(ast.parse(path.read_text(), rel), module, is_package):
                if name.split(".")[0] == other:
                    found.append(f"{rel}:{line} imports {name}")
    return found


@pytest.mark.parametrize("a, b", APART)
def test_packages_kept_apart_import_neither_way(a: str, b: str) -> None:
    assert ties(a, b) == []


def test_the_tie_checker_sees_a_tie(tmp_path: Path) -> None:
    names = [
        n
        for _, n in imported_names(
            ast.parse("def f():\n    from profilers.errors import SpecError\n"),
            "sample_runs.base",
            False,
        )
    ]
    assert names == ["profilers.errors"]


#: The dashboard driver (a Streamlit server and a real Chromium) lives with the browser tests and also serves the
#: dashboard benchmark; it imports no pytest. Nothing else of ``tests`` is a benchmark's to import.
SHARED_WITH_BENCHMARKS = ("tests.browser.harness", "tests.browser.flows")


def test_benchmarks_do_not_import_tests() -> None:
    bad = [
        f"{p.relative_to(REPO)}:{line} imports {name}"
        for p in python_files("benchmarks")
        for line, name in imported_names(ast.parse(p.read_text()), module_name(p)[0], False)
        if name.split(".")[0] == "tests" and not name.startswith(SHARED_WITH_BENCHMARKS)
    ]
    assert bad == []
    for shared in SHARED_WITH_BENCHMARKS:  # never a test dependency in the shared driver
        names = [
            n
            for _, n in imported_names(
                ast.parse((REPO / (shared.replace(".", "/") + ".py")).read_text()), shared, False
            )
        ]
        assert not any(n.split(".")[0] in ("pytest", "tests") for n in names), shared


def test_the_checker_sees_an_upward_edge(tmp_path: Path) -> None:
    source = "import os\nfrom reports.export import render\n\ndef f():\n    import importlib\n    importlib.import_module('cli.advisors')\n"
    names = [name for _, name in imported_names(ast.parse(source), "advisors.x", False)]
    assert [n for n in names if LEVEL.get(n.split(".")[0], -1) > LEVEL["advisors"]] == [
        "reports.export",
        "cli.advisors",
    ]
    assert imported_names(
        ast.parse("from .events import Trace"), "profilers.trace.load", False
    ) == [(1, "profilers.trace.events")]


@pytest.mark.parametrize(
    "top", ["app", "cli", "reports", "advisors", "profilers", "sample_runs", "benchmarks"]
)
def test_no_folder_holds_more_than_twenty_modules(top: str) -> None:
    folders: dict[Path, int] = {}
    for path in python_files(top):
        folders[path.parent] = folders.get(path.parent, 0) + 1
    crowded = {
        str(f.relative_to(REPO)): n for f, n in folders.items() if n > MAX_MODULES_PER_FOLDER
    }
    assert crowded == {}
