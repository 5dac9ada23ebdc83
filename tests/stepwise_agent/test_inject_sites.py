"""Call sites are the user's files: never torch, Stepwise, the standard library or an installed package."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stepwise_agent.inject.sites import called_by_user, is_user_file, user_site


def test_installed_packages_are_not_the_users_files(tmp_path: Path) -> None:
    assert not is_user_file(pytest.__file__)  # site-packages
    assert not is_user_file(json.__file__)  # the standard library
    assert not is_user_file("<string>")  # generated code (a dataclass's __init__)
    mine = tmp_path / "train.py"
    mine.write_text("x = 1\n")
    assert is_user_file(str(mine))


def test_a_site_is_the_innermost_line_of_the_users_file(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(
        "import functools\ndef build():\n    return [f() for f in (lambda: SITE(skip=1), )][0]\n"
    )
    scope: dict = {"SITE": user_site}
    exec(compile(script.read_text(), str(script), "exec"), scope)
    site = scope["build"]()
    assert site["file"] == str(script) and site["line"] == 3 and "via" not in site
    assert called_by_user(1)  # this test file is the caller here: a user file
