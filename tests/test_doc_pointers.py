"""Comments that send a reader to a README section name a section the README has."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
_POINTER = re.compile(r'README,? "([^"]+)"')


@pytest.mark.parametrize("name", ["requirements.txt", "Dockerfile"])
def test_readme_section_pointers_exist(name: str):
    sections = {m.group(1).strip() for m in re.finditer(r"^#+ (.+)$", (REPO / "README.md").read_text(), re.M)}
    pointers = _POINTER.findall((REPO / name).read_text())
    assert pointers, f"{name} no longer points into the README: drop this case"
    assert set(pointers) <= sections, f"{name} points to README sections that do not exist"
