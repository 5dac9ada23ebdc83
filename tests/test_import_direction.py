"""Imports run one way: stepwise → app → cli → reports → advisors → profilers / sample_runs → stepwise_agent.

Every ``import`` in the packages is parsed (function-level and ``importlib.import_module("…")`` ones too) and an
edge from a package to one above it fails the test, naming the file and line. The two ``__main__`` modules are
the only exceptions: ``python -m advisors`` and ``python -m profilers`` are thin entry points into ``cli``.
``benchmarks`` may import any package but not ``tests``; no folder holds more than 20 modules.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# Higher numbers sit above lower ones; packages on one level may import each other.
LEVEL = {"stepwise": 5, "app": 4, "cli": 3, "reports": 2, "advisors": 1, "profilers": 0, "sample_runs": 0,
         "stepwise_agent": -1}  # the in-process agent, below everything: it may import no project package
ENTRY_POINTS = {"advisors/__main__.py", "profilers/__main__.py"}
MAX_MODULES_PER_FOLDER = 20


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
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
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


def test_no_package_imports_one_above_it() -> None:
    assert violations(LEVEL) == []


def test_benchmarks_do_not_import_tests() -> None:
    bad = [f"{p.relative_to(REPO)}:{line} imports {name}"
           for p in python_files("benchmarks")
           for line, name in imported_names(ast.parse(p.read_text()), module_name(p)[0], False)
           if name.split(".")[0] == "tests"]
    assert bad == []


def test_the_checker_sees_an_upward_edge(tmp_path: Path) -> None:
    source = "import os\nfrom reports.export import render\n\ndef f():\n    import importlib\n    importlib.import_module('cli.advisors')\n"
    names = [name for _, name in imported_names(ast.parse(source), "advisors.x", False)]
    assert [n for n in names if LEVEL.get(n.split(".")[0], -1) > LEVEL["advisors"]] == ["reports.export", "cli.advisors"]
    assert imported_names(ast.parse("from .events import Trace"), "profilers.trace.load", False) == [(1, "profilers.trace.events")]


@pytest.mark.parametrize("top", ["app", "cli", "reports", "advisors", "profilers", "sample_runs", "benchmarks"])
def test_no_folder_holds_more_than_twenty_modules(top: str) -> None:
    folders: dict[Path, int] = {}
    for path in python_files(top):
        folders[path.parent] = folders.get(path.parent, 0) + 1
    crowded = {str(f.relative_to(REPO)): n for f, n in folders.items() if n > MAX_MODULES_PER_FOLDER}
    assert crowded == {}
