"""ruff lints the tree: the test command runs ``ruff check .`` before pytest with the pinned ruff,
and the project's ``[tool.ruff]`` settings are the ones it reads (an unused import fails; users'
scripts are skipped)."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def _ruff(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    ruff = [sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format=concise"]
    return subprocess.run([*ruff, *args], cwd=cwd, capture_output=True, text=True, check=False)


def test_the_test_command_lints_after_mypy_and_before_pytest() -> None:
    script = (REPO / "scripts" / "test.sh").read_text()
    lines = [ln.strip() for ln in script.splitlines() if not ln.lstrip().startswith("#")]
    mypy = next(i for i, ln in enumerate(lines) if re.search(r"python -m mypy\b", ln))
    ruff = lines.index(".venv/bin/ruff check .")  # the whole tree, as the config's excludes expect
    pytest_ = next(i for i, ln in enumerate(lines) if re.search(r"python -m pytest .*\"\$@\"", ln))
    formatted = lines.index(".venv/bin/ruff format --check .")
    assert mypy < ruff < formatted < pytest_
    assert "set -euo pipefail" in lines  # a lint error stops the run


def test_ruff_is_pinned_and_configured() -> None:
    dev = _pyproject()["project"]["optional-dependencies"]["dev"]
    ruff_reqs = [r for r in dev if r.startswith("ruff")]
    assert ruff_reqs and all(re.fullmatch(r"ruff==[\d.]+", r) for r in ruff_reqs)
    ruff = _pyproject()["tool"]["ruff"]
    assert ruff["line-length"] == 100 and ruff["target-version"] == "py310"
    assert "F" in ruff["lint"]["select"]
    assert {"tests/scripts", "tests/fixtures"} <= set(ruff["extend-exclude"])


def test_the_projects_rules_find_an_unused_import_and_skip_users_scripts(tmp_path: Path) -> None:
    config = str(REPO / "pyproject.toml")
    (tmp_path / "mine.py").write_text("import os\n")
    (tmp_path / "clean.py").write_text("import os\n\nprint(os.sep)\n")
    found = _ruff("--config", config, "mine.py", "clean.py", cwd=tmp_path)
    assert found.returncode == 1 and "mine.py:1:8: F401" in found.stdout
    assert "clean.py" not in found.stdout
    # The excludes are the project's: `ruff check .` never lints a user's script under tests/scripts
    listed = _ruff("--show-files", ".").stdout
    assert "tests/scripts/" not in listed and "tests/test_lint_config.py" in listed
