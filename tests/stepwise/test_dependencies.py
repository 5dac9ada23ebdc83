"""Every third-party import the shipped code makes is a declared dependency, in the part of pyproject.toml its side
needs: the analysis and the command line in the base dependencies, the sample workloads in ``[samples]``, the
dashboard in ``[dashboard]``. torch is a range (never a pin); this machine's pin lives in constraints.txt, which
every install the README's scripts make goes through."""

from __future__ import annotations

import ast
import functools
import importlib.util
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path
from types import ModuleType
from typing import Mapping

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
OWN = {
    "stepwise",
    "stepwise_agent",
    "app",
    "cli",
    "reports",
    "advisors",
    "profilers",
    "sample_runs",
    "tests",
    "benchmarks",
}
# Users' training scripts the tests run in the second environment (tests.user_env): their imports are theirs.
USER_SCRIPTS = ("tests/scripts/",)
# Imports whose module belongs to one distribution but needs another (torch's TensorBoard writer).
NEEDS = {"torch.utils.tensorboard": "tensorboard"}
# What each part of the code may import: the base dependencies plus these extras.
SIDES = {
    "stepwise": (),
    "stepwise/dashboard.py": ("dashboard",),
    "cli": (),
    "advisors": (),
    "reports": (),
    "stepwise_agent": (),
    "profilers": ("samples",),  # the sample workloads' worker writes TensorBoard scalars
    "profilers/jobs/engines.py": ("cluster",),  # --engine ray
    "sample_runs": ("samples",),
    "app": ("dashboard",),
    "tests": ("dashboard", "dev"),
}


def _project() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def _requirements_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "stepwise_requirements", REPO / "scripts" / "requirements.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def declared(extras: tuple[str, ...]) -> set[str]:
    """Distribution names of the base dependencies and ``extras`` (self-references such as ``stepwise[samples]``
    followed), read as the Dockerfile reads them (``scripts/requirements.py``)."""
    reqs = _requirements_script().requirements(REPO / "pyproject.toml", list(extras))
    return {canonicalize_name(Requirement(r).name) for r in reqs}


def _type_checking_only(tree: ast.AST) -> set[int]:
    """Line numbers of imports under ``if TYPE_CHECKING:`` (never run)."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            lines |= {
                n.lineno for stmt in node.body for n in ast.walk(stmt) if isinstance(n, ast.stmt)
            }
    return lines


def third_party_imports(path: Path) -> set[str]:
    """Dotted names of the absolute, non-standard-library, non-project imports in ``path``."""
    tree = ast.parse(path.read_text(), str(path))
    skip = _type_checking_only(tree)
    names: set[str] = set()
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module)
    return {
        n
        for n in names
        if n.split(".")[0] not in OWN and n.split(".")[0] not in sys.stdlib_module_names
    }


def distributions(module: str) -> set[str]:
    """The distributions an import needs, by this environment's installed files."""
    for prefix, dist in NEEDS.items():
        if module == prefix or module.startswith(prefix + "."):
            return {canonicalize_name(dist)}
    top = module.split(".")[0]
    # One not installed here (tomli, Python 3.10's TOML reader) is looked up by its own name.
    return {canonicalize_name(d) for d in _installed().get(top, [top])}


@functools.lru_cache(maxsize=1)
def _installed() -> Mapping[str, list[str]]:
    return packages_distributions()


def _side(path: Path) -> str:
    rel = path.relative_to(REPO).as_posix()
    return max((s for s in SIDES if rel == s or rel.startswith(s + "/")), key=len)


def undeclared() -> list[str]:
    out = []
    for side in {s.split("/")[0] for s in SIDES}:
        for path in sorted((REPO / side).rglob("*.py")):
            if path.relative_to(REPO).as_posix().startswith(USER_SCRIPTS):
                continue
            allowed = declared(SIDES[_side(path)])
            for module in sorted(third_party_imports(path)):
                missing = distributions(module) - allowed
                if missing:
                    out.append(
                        f"{path.relative_to(REPO)}: import {module} needs {', '.join(sorted(missing))}"
                    )
    return out


@pytest.mark.slow
def test_every_import_is_declared_where_its_side_needs_it() -> None:
    assert undeclared() == []


def test_the_check_sees_an_undeclared_import(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(
        "import os\nimport yaml\nfrom PIL import Image\nfrom profilers import x\n"
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import streamlit\n"
    )
    assert third_party_imports(tmp_path / "m.py") == {"yaml", "PIL"}
    assert distributions("PIL") == {"pillow"} and distributions("torch.utils.tensorboard") == {
        "tensorboard"
    }
    assert "pillow" not in declared(()) and "pillow" in declared(
        ("dashboard",)
    )  # through stepwise[samples]


def test_torch_is_a_range_and_this_machines_pin_is_a_constraint() -> None:
    torch = next(
        Requirement(r) for r in _project()["dependencies"] if Requirement(r).name == "torch"
    )
    assert not any(s.operator in ("==", "===", "~=") for s in torch.specifier)
    assert torch.specifier.contains("2.1.0") and not torch.specifier.contains(
        "2.0.1"
    )  # oldest supported: 2.1
    pins = [ln.split("#")[0].strip() for ln in (REPO / "constraints.txt").read_text().splitlines()]
    assert "torch==2.13.0" in pins
    setup = (REPO / "scripts" / "setup.sh").read_text()
    assert 'pip install --quiet -c constraints.txt -e ".[dev]"' in setup
    docker = [ln for ln in (REPO / "Dockerfile").read_text().splitlines() if "pip install" in ln]
    assert docker and all("-c constraints.txt" in ln for ln in docker if "--upgrade pip" not in ln)


@pytest.mark.parametrize("name", ["requirements.txt", "requirements-dev.txt"])
def test_one_list_of_dependencies(name: str) -> None:
    assert not (REPO / name).exists(), f"{name}: the dependencies live in pyproject.toml"
