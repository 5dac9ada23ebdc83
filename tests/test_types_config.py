"""mypy covers every package: pyproject's ``[tool.mypy] packages`` names each top-level package (a folder with an
``__init__.py`` that setup.py installs, as a top-level name or under ``stepwise/_lib``), skips no typed third party,
and the README's test command runs it."""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path
from types import ModuleType

from tests.test_import_direction import LEVEL

REPO = Path(__file__).resolve().parents[1]
NOT_SHIPPED = {"tests"}  # test code: checked by pytest, not part of the installed project


def _pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def _mypy() -> dict:
    return _pyproject()["tool"]["mypy"]


def top_level_packages(root: Path) -> set[str]:
    """Folders under ``root`` with an ``__init__.py``: what ``import NAME`` finds from the repository root."""
    return {p.parent.name for p in root.glob("*/__init__.py")} - NOT_SHIPPED


def test_mypy_checks_every_top_level_package() -> None:
    packages = set(_mypy()["packages"])
    assert packages == top_level_packages(REPO), (
        "add the new package to [tool.mypy] packages in pyproject.toml"
    )


def _setup() -> ModuleType:
    """setup.py as a module (its ``setup()`` call runs only as ``__main__``)."""
    spec = importlib.util.spec_from_file_location("stepwise_setup", REPO / "setup.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_installed_package_is_checked() -> None:
    setup = _setup()
    installed = set(setup.LIB) | set(setup.TOP)
    assert installed == top_level_packages(REPO), "add the new package to LIB in setup.py"
    assert installed == set(_mypy()["packages"])
    assert set(LEVEL) == set(
        _mypy()["packages"]
    )  # the import-direction test knows the same packages


def test_the_package_finder_sees_a_new_package(tmp_path: Path) -> None:
    (tmp_path / "newpkg").mkdir()
    (tmp_path / "newpkg" / "__init__.py").write_text("")
    (tmp_path / "notes").mkdir()  # a folder without __init__.py is no package
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "__init__.py").write_text("")
    assert top_level_packages(tmp_path) == {"newpkg"}


def test_untyped_imports_are_ignored_one_module_at_a_time() -> None:
    mypy = _mypy()
    assert "ignore_missing_imports" not in mypy, (
        "a global ignore_missing_imports would hide a missing stub"
    )
    assert (
        mypy.get("check_untyped_defs")
        and mypy.get("warn_unused_ignores")
        and mypy.get("no_implicit_optional")
    )
    ignored = [
        m for o in mypy.get("overrides", []) if o.get("ignore_missing_imports") for m in o["module"]
    ]
    assert ignored and not any(m.split(".")[0] in mypy["packages"] for m in ignored)
    assert "*" not in {m.split(".")[0] for m in ignored}


def test_the_test_command_runs_mypy_before_pytest() -> None:
    script = (REPO / "scripts" / "test.sh").read_text()
    lines = [ln.strip() for ln in script.splitlines() if not ln.lstrip().startswith("#")]
    mypy = next(i for i, ln in enumerate(lines) if re.search(r"python -m mypy\b", ln))
    pytest_ = next(i for i, ln in enumerate(lines) if re.search(r"python -m pytest .*\"\$@\"", ln))
    assert (
        mypy < pytest_ and "||" not in lines[mypy]
    )  # its failure stops the run (set -e), never swallowed
    assert "set -euo pipefail" in lines


def test_the_type_checker_is_installed_by_setup() -> None:
    setup = (REPO / "scripts" / "setup.sh").read_text()
    assert '-e ".[dev]"' in setup
    dev = _pyproject()["project"]["optional-dependencies"]["dev"]
    pins = dict(r.split("==") for r in dev if "==" in r)
    assert "mypy" in pins and all(re.fullmatch(r"[\d.]+", v) for v in pins.values())
    assert {
        n for n in pins if n.startswith("types-") or n.endswith("-stubs")
    }  # the stubs pinned with it
