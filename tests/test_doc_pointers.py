"""Comments that send a reader to a README section name a section the README has."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
_POINTER = re.compile(r'README,? "([^"]+)"')


@pytest.mark.parametrize("name", ["constraints.txt", "Dockerfile"])
def test_readme_section_pointers_exist(name: str):
    sections = {m.group(1).strip() for m in re.finditer(r"^#+ (.+)$", (REPO / "README.md").read_text(), re.M)}
    pointers = _POINTER.findall((REPO / name).read_text())
    assert pointers, f"{name} no longer points into the README: drop this case"
    assert set(pointers) <= sections, f"{name} points to README sections that do not exist"


_RESULTS = re.compile(r"benchmarks/results/[\w.-]*\w")
_DATE = re.compile(r"\b20\d\d-[01]\d(-[0-3]\d)?\b")
_CODE = ("advisors", "app", "cli", "profilers", "reports", "sample_runs", "tests")


def _code_files() -> list[Path]:
    return sorted(p for top in _CODE for p in (REPO / top).rglob("*.py") if "__pycache__" not in p.parts)


def test_results_pointers_name_files_that_exist():
    pointers = {(p.relative_to(REPO).as_posix(), m) for p in _code_files() for m in _RESULTS.findall(p.read_text())}
    assert pointers, "no code points to benchmarks/results any more: drop this test"
    missing = sorted(f"{src} -> {target}" for src, target in pointers if not (REPO / target).is_file())
    assert missing == []


def test_dated_measurements_live_in_benchmarks_results():
    """A date in code is a measurement that belongs in ``benchmarks/results/`` (the code keeps a pointer to it)."""
    dated = [f"{p.relative_to(REPO)}:{n}" for p in _code_files()
             for n, line in enumerate(p.read_text().splitlines(), 1)
             if _DATE.search(_RESULTS.sub("", line)) and p.name != "test_doc_pointers.py"]
    assert dated == []
