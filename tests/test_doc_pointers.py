"""Pointers into the documentation lead somewhere: a comment's ``README, "Section"`` names a section
the README has, a ``docs/….md, "Section"`` names a page that exists and a heading it has, and every
relative link of the README, CONTRIBUTING.md and docs/ reaches a file (and, with ``#anchor``, a
heading of it)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
_POINTER = re.compile(r'README,? "([^"]+)"')
_DOCS_POINTER = re.compile(r'\b(docs/[\w/.-]+\.md)(?:,\s+"([^"]+)")?')
_CONFIG = (
    "constraints.txt",
    "Dockerfile",
    "pyproject.toml",
    ".streamlit/config.toml",
    "scripts/setup.sh",
)
_MARKDOWN = ("README.md", "CONTRIBUTING.md", "docs")


def _headings(path: Path) -> list[str]:
    """A Markdown file's headings as text (code marks dropped)."""
    return [
        m.group(1).replace("`", "").strip()
        for m in re.finditer(r"^#+ (.+)$", path.read_text(), re.M)
    ]


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def _pointing_files() -> list[Path]:
    return [REPO / name for name in _CONFIG] + [
        p for p in _code_files() if p.name != "test_doc_pointers.py"
    ]


def _pointers() -> set[tuple[str, str, str]]:
    """``(file, page, section)`` for every pointer into the README or docs/ (section "" when none
    is quoted)."""
    out = set()
    for p in _pointing_files():
        text, src = p.read_text(), p.relative_to(REPO).as_posix()
        out |= {(src, "README.md", section) for section in _POINTER.findall(text)}
        out |= {(src, page, section) for page, section in _DOCS_POINTER.findall(text)}
    return out


def test_pointers_name_pages_and_headings_that_exist():
    pointers = _pointers()
    assert len({src for src, _, _ in pointers} & set(_CONFIG)) >= 3, (
        "the config files no longer point into docs/"
    )
    missing = sorted(
        f"{src} -> {page} {section!r}"
        for src, page, section in pointers
        if not (REPO / page).is_file()
        or section
        and not any(h.startswith(section) for h in _headings(REPO / page))
    )
    assert missing == []


def _markdown_files() -> list[Path]:
    return sorted(
        f
        for name in _MARKDOWN
        for f in ([REPO / name] if name.endswith(".md") else (REPO / name).rglob("*.md"))
    )


@pytest.mark.parametrize("page", _markdown_files(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_relative_links_lead_somewhere(page: Path):
    links = re.findall(r"\]\(([^)\s]+)\)", page.read_text())
    broken = []
    for link in links:
        if re.match(r"[a-z]+:", link):
            continue  # http(s), mailto: not ours to check
        target, _, anchor = link.partition("#")
        path = (page.parent / target).resolve() if target else page
        if not path.exists():
            broken.append(link)
        elif anchor and path.is_file() and anchor not in {_slug(h) for h in _headings(path)}:
            broken.append(link)
    assert broken == []


_RESULTS = re.compile(r"benchmarks/results/[\w.-]*\w")
_DATE = re.compile(r"\b20\d\d-[01]\d(-[0-3]\d)?\b")
_CODE = ("advisors", "app", "cli", "profilers", "reports", "sample_runs", "tests")


def _code_files() -> list[Path]:
    return sorted(
        p for top in _CODE for p in (REPO / top).rglob("*.py") if "__pycache__" not in p.parts
    )


def test_results_pointers_name_files_that_exist():
    pointers = {
        (p.relative_to(REPO).as_posix(), m)
        for p in _code_files()
        for m in _RESULTS.findall(p.read_text())
    }
    assert pointers, "no code points to benchmarks/results any more: drop this test"
    missing = sorted(
        f"{src} -> {target}" for src, target in pointers if not (REPO / target).is_file()
    )
    assert missing == []


def test_dated_measurements_live_in_benchmarks_results():
    """A date in code is a measurement that belongs in ``benchmarks/results/`` (the code keeps a pointer to it)."""
    dated = [
        f"{p.relative_to(REPO)}:{n}"
        for p in _code_files()
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if _DATE.search(_RESULTS.sub("", line)) and p.name != "test_doc_pointers.py"
    ]
    assert dated == []
